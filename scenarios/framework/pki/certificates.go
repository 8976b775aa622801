// Package pki makes the certificates scenarios bring (a CA, the serving certificates it signs,
// the Secret external mode reads them from) and describes certificates and caBundles the way a
// person debugging TLS reads them: subject, SANs, validity, serial, and which caBundle lacks or
// repeats a CA. It knows no cluster and no release.
package pki

import (
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	cmpki "github.com/cert-manager/cert-manager/pkg/util/pki"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
)

// CertificateAuthority is a CA made by the scenarios themselves (external mode, or a CA the
// operator does not know), with its key, so it can sign serving certificates.
type CertificateAuthority struct {
	Cert *x509.Certificate
	// PEM is the CA certificate, PEM-encoded: what goes into ca.crt and webhook.caBundle.
	PEM []byte
	key crypto.Signer
}

// NewCertificateAuthority creates a self-signed ECDSA P-256 CA valid from an hour ago (clock
// skew between this host and the cluster) for validity.
func NewCertificateAuthority(commonName string, validity time.Duration) (*CertificateAuthority, error) {
	key, err := cmpki.GenerateECPrivateKey(cmpki.ECCurve256)
	if err != nil {
		return nil, fmt.Errorf("generating the key of CA %q: %w", commonName, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"gauntlet"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	certPEM, cert, err := cmpki.SignCertificate(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate %q: %w", commonName, err)
	}
	return &CertificateAuthority{Cert: cert, PEM: certPEM, key: key}, nil
}

// CABundle is the CA as a caBundle value (webhook.caBundle) wants it: base64 of the PEM.
func (ca *CertificateAuthority) CABundle() string { return base64.StdEncoding.EncodeToString(ca.PEM) }

// KeyPEM is the CA's private key, PKCS #8 PEM: what a program needs that issues its own serving
// certificates from this CA (LoadCertificateAuthority).
func (ca *CertificateAuthority) KeyPEM() ([]byte, error) {
	key, err := cmpki.EncodePKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("encoding the key of CA %q: %w", ca.Cert.Subject.CommonName, err)
	}
	return key, nil
}

// LoadCertificateAuthority is the CA whose certificate is certPEM and whose key is keyPEM (as
// KeyPEM writes it), ready to Issue.
func LoadCertificateAuthority(certPEM, keyPEM []byte) (*CertificateAuthority, error) {
	cert, err := cmpki.DecodeX509CertificateBytes(certPEM)
	if err != nil {
		return nil, fmt.Errorf("reading the CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("the certificate %s is not a CA's (basic constraints CA:FALSE)", Describe(cert))
	}
	key, err := cmpki.DecodePrivateKeyBytes(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("reading the key of CA %s: %w", Describe(cert), err)
	}
	if ok, err := cmpki.PublicKeyMatchesCertificate(key.Public(), cert); err != nil || !ok {
		return nil, fmt.Errorf("the key is not the key of CA %s", Describe(cert))
	}
	return &CertificateAuthority{Cert: cert, PEM: certPEM, key: key}, nil
}

// LeafOptions describe a serving certificate. The zero values of NotBefore and NotAfter mean
// "an hour ago" and "in a year"; scenarios set them to make expired or not-yet-valid
// certificates, and DNSNames to make certificates for the wrong host.
type LeafOptions struct {
	DNSNames            []string
	IPAddresses         []net.IP
	NotBefore, NotAfter time.Time
}

// Issue signs a serving certificate (server auth, ECDSA P-256, PKCS #8 key) with the CA.
func (ca *CertificateAuthority) Issue(opts LeafOptions) (*ServingCertificate, error) {
	if len(opts.DNSNames) == 0 && len(opts.IPAddresses) == 0 {
		return nil, errors.New("issuing a serving certificate: no DNS name or IP address given")
	}
	now := time.Now()
	if opts.NotBefore.IsZero() {
		opts.NotBefore = now.Add(-time.Hour)
	}
	if opts.NotAfter.IsZero() {
		opts.NotAfter = now.Add(365 * 24 * time.Hour)
	}
	key, err := cmpki.GenerateECPrivateKey(cmpki.ECCurve256)
	if err != nil {
		return nil, fmt.Errorf("generating a serving key: %w", err)
	}
	cn := ""
	if len(opts.DNSNames) > 0 {
		cn = opts.DNSNames[0]
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"gauntlet"}},
		DNSNames:    opts.DNSNames,
		IPAddresses: opts.IPAddresses,
		NotBefore:   opts.NotBefore,
		NotAfter:    opts.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	certPEM, leaf, err := cmpki.SignCertificate(tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing a serving certificate for %v with CA %q: %w", opts.DNSNames, ca.Cert.Subject.CommonName, err)
	}
	keyPEM, err := cmpki.EncodePKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the serving key: %w", err)
	}
	return &ServingCertificate{CA: ca.Cert, CAPEM: ca.PEM, Leaf: leaf, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// ServingCertificate is a webhook serving certificate with its key and the CA that signed it.
type ServingCertificate struct {
	CA      *x509.Certificate
	CAPEM   []byte
	Leaf    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// NewServingCertificate makes a fresh CA (valid ten years) and a serving certificate for host
// (valid a year): what a user of external mode brings.
func NewServingCertificate(host string) (*ServingCertificate, error) {
	ca, err := NewCertificateAuthority("gauntlet external CA for "+host, 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	return ca.Issue(LeafOptions{DNSNames: []string{host}})
}

// CABundle is the CA as webhook.caBundle wants it: base64 of the PEM.
func (s *ServingCertificate) CABundle() string { return base64.StdEncoding.EncodeToString(s.CAPEM) }

// CertificateInfo is what a person debugging TLS wants to know about a certificate, and
// nothing secret: identity, names, validity and serial.
type CertificateInfo struct {
	Subject   string    `json:"subject"`
	Issuer    string    `json:"issuer"`
	Serial    string    `json:"serial"`
	DNSNames  []string  `json:"dnsNames,omitempty"`
	IPs       []string  `json:"ipAddresses,omitempty"`
	NotBefore time.Time `json:"notBefore"`
	NotAfter  time.Time `json:"notAfter"`
	IsCA      bool      `json:"isCA"`
}

// Describe returns the CertificateInfo of c. Serials are hex, as openssl prints them.
func Describe(c *x509.Certificate) CertificateInfo {
	info := CertificateInfo{
		Subject:   c.Subject.String(),
		Issuer:    c.Issuer.String(),
		Serial:    SerialHex(c),
		DNSNames:  c.DNSNames,
		NotBefore: c.NotBefore.UTC(),
		NotAfter:  c.NotAfter.UTC(),
		IsCA:      c.IsCA,
	}
	for _, ip := range c.IPAddresses {
		info.IPs = append(info.IPs, ip.String())
	}
	return info
}

// String is one line: subject, SANs, validity window, serial.
func (i CertificateInfo) String() string {
	sans := append(append([]string{}, i.DNSNames...), i.IPs...)
	ca := ""
	if i.IsCA {
		ca = " CA"
	}
	return fmt.Sprintf("%s%s: SANs [%s], valid %s to %s, serial %s, issuer %s", i.Subject, ca, strings.Join(sans, ", "),
		i.NotBefore.Format(time.RFC3339), i.NotAfter.Format(time.RFC3339), i.Serial, i.Issuer)
}

// SerialHex is a certificate's serial number in hex.
func SerialHex(c *x509.Certificate) string { return c.SerialNumber.Text(16) }

// SecretCertificates is a release's certificate Secret as a user inspects it, parsed.
type SecretCertificates struct {
	Secret *corev1.Secret
	Leaf   *x509.Certificate // first certificate of tls.crt
	CA     *x509.Certificate // first certificate of ca.crt
}

func (s SecretCertificates) String() string {
	return fmt.Sprintf("serving certificate serial %s, CA serial %s", SerialHex(s.Leaf), SerialHex(s.CA))
}

// ServingSecret is the Secret a user creates for external mode: type kubernetes.io/tls with
// tls.crt, tls.key and ca.crt. With olmFileNames it is an Opaque Secret holding the pair as
// tls.cert and tls.key, the file names OLM mounts a serving certificate under, so the operator
// sees exactly OLM's files in its certificate directory.
func ServingSecret(namespace, name string, sc *ServingCertificate, olmFileNames bool) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "gauntlet"}},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       sc.CertPEM,
			corev1.TLSPrivateKeyKey: sc.KeyPEM,
			"ca.crt":                sc.CAPEM,
		},
	}
	if olmFileNames {
		s.Type = corev1.SecretTypeOpaque
		s.Data = map[string][]byte{"tls.cert": sc.CertPEM, "tls.key": sc.KeyPEM, "ca.crt": sc.CAPEM}
	}
	return s
}

// DescribePEM names the certificates of a PEM bundle by subject and serial.
func DescribePEM(pemBytes []byte) string {
	certs, err := certutil.ParseCertsPEM(pemBytes)
	if err != nil {
		return "(unparseable: " + err.Error() + ")"
	}
	var names []string
	for _, c := range certs {
		names = append(names, fmt.Sprintf("%q (serial %s)", c.Subject.CommonName, SerialHex(c)))
	}
	return strings.Join(names, " + ")
}
