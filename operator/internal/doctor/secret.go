package doctor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	certutil "k8s.io/client-go/util/cert"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator/internal/certs"
)

// Keys of the serving-certificate Secret in every mode.
const (
	keyTLSCert = "tls.crt"
	keyTLSKey  = "tls.key"
	keyCACert  = "ca.crt"
)

// reissue is the fix for a Secret whose certificate cannot be served, by mode.
func (s *session) reissue() []string {
	ns := s.opts.Namespace
	switch s.mode {
	case certs.ModeCertManager:
		return []string{fmt.Sprintf("kubectl -n %s delete secret %s   # cert-manager re-issues Certificate %s-serving-cert",
			ns, s.secretName, s.opts.Release)}
	case certs.ModeExternal:
		return []string{
			fmt.Sprintf("# re-issue tls.crt with DNS name %s, signed by the CA in webhook.caBundle, then:", s.serviceHost()),
			fmt.Sprintf("kubectl -n %s create secret generic %s --type=kubernetes.io/tls --from-file=tls.crt --from-file=tls.key --from-file=ca.crt --dry-run=client -o yaml | kubectl apply -f -",
				ns, s.secretName),
		}
	}
	return []string{s.fix.rolloutRestart() + "   # automatic mode regenerates an unusable certificate at startup"}
}

// checkSecret reads the serving-certificate Secret: present, all three keys, a matching key
// pair, a certificate within its validity whose SANs include <svc>.<ns>.svc. Key material is
// parsed, never printed.
func checkSecret(ctx context.Context, s *session) outcome {
	key := client.ObjectKey{Namespace: s.opts.Namespace, Name: s.secretName}
	host := s.serviceHost()
	title := fmt.Sprintf("Secret %s holds a serving certificate for %s within its validity", key, host)

	var secret corev1.Secret
	if err := s.client.Get(ctx, key, &secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return failure(title, readError("getting Secret "+key.String(), err))
		}
		switch s.mode {
		case certs.ModeCertManager:
			return failure(title, undocumented(
				fmt.Sprintf("Secret %s not found: cert-manager has not issued Certificate %s-serving-cert", key, s.opts.Release),
				fmt.Sprintf("kubectl -n %s describe certificate %s-serving-cert", s.opts.Namespace, s.opts.Release)))
		case certs.ModeExternal:
			return failure(title, undocumented(
				fmt.Sprintf("Secret %s not found: in external mode you create it (keys tls.crt, tls.key, ca.crt)", key),
				s.reissue()...))
		}
		return failure(title, documented(t11,
			fmt.Sprintf("Secret %s not found; the operator keeps serving the certificate it loaded until it regenerates one", key),
			s.fix.rolloutRestart()))
	}

	var missing []string
	for _, k := range []string{keyTLSCert, keyTLSKey, keyCACert} {
		if len(secret.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return failure(title, undocumented(
			fmt.Sprintf("Secret %s lacks %s (it needs tls.crt, tls.key and ca.crt)", key, strings.Join(missing, ", ")),
			s.reissue()...))
	}
	// X509KeyPair's errors describe the mismatch, never the key.
	if _, err := tls.X509KeyPair(secret.Data[keyTLSCert], secret.Data[keyTLSKey]); err != nil {
		return failure(title, undocumented(fmt.Sprintf("Secret %s: tls.crt and tls.key are not a usable key pair: %v", key, err),
			s.reissue()...))
	}
	chain, err := certutil.ParseCertsPEM(secret.Data[keyTLSCert])
	if err != nil {
		return failure(title, undocumented(fmt.Sprintf("Secret %s: tls.crt: %v", key, err), s.reissue()...))
	}
	leaf := chain[0]
	details := []string{describeCertificate("tls.crt", leaf)}
	if roots, err := certutil.ParseCertsPEM(secret.Data[keyCACert]); err != nil {
		details = append(details, "ca.crt does not parse: "+err.Error())
	} else if err := verifyTrust(chain, roots, leaf); err != nil {
		details = append(details, "tls.crt does not chain to ca.crt: "+err.Error())
	} else {
		details = append(details, "tls.crt chains to ca.crt")
	}

	now := s.opts.Now()
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return failure(title, documented(t5,
			fmt.Sprintf("the certificate in Secret %s is valid from %s until %s, not now (%s)", key,
				leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)),
			s.reissue()...), details...)
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return failure(title, documented(t4,
			fmt.Sprintf("the certificate in Secret %s is valid for %s, not %s", key, strings.Join(certificateNames(leaf), ", "), host),
			s.reissue()...), details...)
	}
	s.secretChain = chain
	return pass(title, details...)
}

// verifyTrust checks that chain (leaf first) chains to one of roots for server auth, at a
// moment inside the leaf's validity: it judges trust only, expiry is checked on its own.
func verifyTrust(chain, roots []*x509.Certificate, leaf *x509.Certificate) error {
	pool, intermediates := x509.NewCertPool(), x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	at := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) / 2)
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: intermediates, CurrentTime: at,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

// certificateNames are the names a certificate is valid for (DNS SANs, IP SANs, or the CN).
func certificateNames(c *x509.Certificate) []string {
	names := append([]string{}, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 && c.Subject.CommonName != "" {
		names = append(names, c.Subject.CommonName+" (CN only)")
	}
	return names
}

func describeCertificate(what string, c *x509.Certificate) string {
	return fmt.Sprintf("%s: subject %q, issuer %q, serial %s, DNS names [%s], valid %s to %s", what,
		c.Subject.String(), c.Issuer.String(), c.SerialNumber.Text(16), strings.Join(c.DNSNames, ", "),
		c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
}
