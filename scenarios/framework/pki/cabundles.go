package pki

import (
	"bytes"
	"crypto/x509"
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
