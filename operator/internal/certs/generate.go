package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// Secret keys, the same as cert-manager's, so every mode mounts the same layout.
const (
	keyTLSCert = "tls.crt"
	keyTLSKey  = "tls.key"
	keyCACert  = "ca.crt"
)

// backdate tolerates clocks that lag the operator's (API server, other nodes) so a fresh
// certificate is never "not yet valid".
const backdate = 5 * time.Minute

// servingBundle is what the Secret holds: the serving certificate, its private key and the CA
// bundle clients should trust. The fields stay unexported and the type implements fmt's
// interfaces, so a bundle (and its key) can't end up in a log line or error by accident.
type servingBundle struct {
	certPEM, keyPEM, caPEM []byte
	leaf                   *x509.Certificate // parsed certPEM
	ca                     *x509.Certificate // the root the leaf chains to
}

func (b *servingBundle) String() string {
	if b == nil {
		return "<nil>"
	}
	return fmt.Sprintf("serving certificate serial %s (expires %s), CA serial %s (expires %s)",
		b.leaf.SerialNumber.Text(16), b.leaf.NotAfter.UTC().Format(time.RFC3339),
		b.ca.SerialNumber.Text(16), b.ca.NotAfter.UTC().Format(time.RFC3339))
}

func (b *servingBundle) GoString() string { return b.String() }

func (b *servingBundle) secretData() map[string][]byte {
	return map[string][]byte{keyTLSCert: b.certPEM, keyTLSKey: b.keyPEM, keyCACert: b.caPEM}
}

// generateBundle creates a self-signed root CA and a serving certificate for the webhook
// Service signed by it. Keys are ECDSA P-256: every supported API server accepts them and
// they are generated in microseconds, which matters when two replicas race at startup.
// The CA key is discarded after signing: rotation always makes a new CA, so nothing else
// would ever need it, and it can't leak from the Secret.
func generateBundle(o *Options, now time.Time) (*servingBundle, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	caSerial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               pkix.Name{CommonName: o.ServiceName + "-ca", Organization: []string{"dynamo-operator"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(o.CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parsing generated CA certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(o.ServerValidity)
	if notAfter.After(ca.NotAfter) {
		// A leaf outliving its CA would just fail verification later; say so up front.
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: o.serviceHost(), Organization: []string{"dynamo-operator"}},
		DNSNames:              o.dnsNames(),
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("signing serving certificate for %s: %w", o.serviceHost(), err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing generated serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding serving key: %w", err)
	}
	return &servingBundle{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		leaf:    leaf,
		ca:      ca,
	}, nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating certificate serial number: %w", err)
	}
	return serial, nil
}
