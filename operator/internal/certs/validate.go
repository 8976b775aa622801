package certs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// loadBundle checks that the Secret's data can be served as is and says why not otherwise:
// all three keys present, tls.crt and tls.key a matching pair, the certificate valid for the
// Service's DNS name, chaining to ca.crt for server auth, and neither the certificate nor its
// CA expiring within the look-ahead. The reasons never quote the data (tls.key is secret).
func loadBundle(data map[string][]byte, o *Options, now time.Time) (*servingBundle, error) {
	for _, k := range []string{keyTLSCert, keyTLSKey, keyCACert} {
		if len(data[k]) == 0 {
			return nil, fmt.Errorf("%s is missing or empty", k)
		}
	}
	pair, err := tls.X509KeyPair(data[keyTLSCert], data[keyTLSKey])
	if err != nil {
		return nil, fmt.Errorf("%s and %s are not a usable key pair: %w", keyTLSCert, keyTLSKey, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", keyTLSCert, err)
		}
	}
	roots, err := certutil.ParseCertsPEM(data[keyCACert])
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", keyCACert, err)
	}

	host := o.serviceHost()
	if err := leaf.VerifyHostname(host); err != nil {
		return nil, fmt.Errorf("serving certificate is not valid for %s (its DNS names: %v)", host, leaf.DNSNames)
	}
	if now.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("serving certificate is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if !now.Add(o.LookAhead).Before(leaf.NotAfter) {
		return nil, fmt.Errorf("serving certificate expires at %s, within the look-ahead of %s", leaf.NotAfter.UTC().Format(time.RFC3339), o.LookAhead)
	}

	rootPool, intermediates := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range roots {
		rootPool.AddCert(c)
	}
	for _, der := range pair.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("parsing intermediate certificate in %s: %w", keyTLSCert, err)
		}
		intermediates.AddCert(c)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{
		Roots:         rootPool,
		Intermediates: intermediates,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate does not verify against %s: %w", keyCACert, err)
	}
	chain := chains[0]
	for _, c := range chain[1:] {
		if !now.Add(o.LookAhead).Before(c.NotAfter) {
			return nil, fmt.Errorf("CA certificate %q expires at %s, within the look-ahead of %s", c.Subject.CommonName, c.NotAfter.UTC().Format(time.RFC3339), o.LookAhead)
		}
	}
	return &servingBundle{
		certPEM: data[keyTLSCert],
		keyPEM:  data[keyTLSKey],
		caPEM:   data[keyCACert],
		leaf:    leaf,
		ca:      chain[len(chain)-1],
	}, nil
}
