package pki

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	certutil "k8s.io/client-go/util/cert"
)

// CABundles are the caBundles the API server uses to call a release's webhooks, by place:
// "ValidatingWebhookConfiguration <name> webhook <webhook>", "CustomResourceDefinition <name>
// conversion".
type CABundles map[string][]byte

// Missing lists, sorted, the places whose caBundle does not contain the CA certificate caPEM
// (every place, when caPEM is empty and the bundle is too).
func (b CABundles) Missing(caPEM []byte) []string {
	var out []string
	for place, bundle := range b {
		if !bundleHas(bundle, caPEM) {
			out = append(out, place)
		}
	}
	slices.Sort(out)
	return out
}

// DescribeMissing says, for each place Missing reports, what its caBundle holds instead:
// "<place>: empty" or "<place>: holds \"<CA>\" (serial …)".
func (b CABundles) DescribeMissing(caPEM []byte) string {
	var out []string
	for _, place := range b.Missing(caPEM) {
		bundle := b[place]
		if len(bundle) == 0 {
			out = append(out, place+": empty")
			continue
		}
		out = append(out, place+": holds "+DescribePEM(bundle))
	}
	return strings.Join(out, "; ")
}

// Repeated lists, sorted, the places whose caBundle holds ca more than once, with how often
// ("<place>: 2 copies"): trust added again where it was already.
func (b CABundles) Repeated(ca *x509.Certificate) []string {
	var out []string
	for place, bundle := range b {
		certs, err := certutil.ParseCertsPEM(bundle)
		if err != nil {
			continue // an unparseable bundle is Missing's to report
		}
		n := 0
		for _, c := range certs {
			if c.Equal(ca) {
				n++
			}
		}
		if n > 1 {
			out = append(out, fmt.Sprintf("%s: %d copies", place, n))
		}
	}
	slices.Sort(out)
	return out
}

func bundleHas(bundle, caPEM []byte) bool {
	return len(bundle) > 0 && (len(caPEM) == 0 || bytes.Contains(bundle, bytes.TrimSpace(caPEM)))
}

// VerifyServed checks a served chain against a caBundle the way the API server's webhook client
// does: the bundle's certificates as roots, the rest of the chain as intermediates, host (the
// Service's <name>.<namespace>.svc) as the name, server auth.
func VerifyServed(bundle []byte, chain []*x509.Certificate, host string) error {
	if len(bundle) == 0 {
		return errors.New("the caBundle is empty")
	}
	if len(chain) == 0 {
		return errors.New("no certificate was served")
	}
	cas, err := certutil.ParseCertsPEM(bundle)
	if err != nil {
		return fmt.Errorf("the caBundle does not parse: %w", err)
	}
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	for _, ca := range cas {
		roots.AddCert(ca)
	}
	for _, cert := range chain[1:] {
		intermediates.AddCert(cert)
	}
	_, err = chain[0].Verify(x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}
