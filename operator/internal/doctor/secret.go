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
	case modeUnknown:
		return []string{
			fmt.Sprintf("# re-issue the serving certificate in Secret %s/%s with DNS name %s, with whatever issues it (cert-manager, the operator's own cert-controller, or by hand), then let the server load it:",
				ns, s.secretName, s.serviceHost()),
			s.fix.rolloutRestart(),
		}
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
	if s.secretName == "" {
		return inapplicable(fmt.Sprintf("the serving-certificate Secret holds a certificate for %s within its validity", host), s.noSecret)
	}
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
		case modeUnknown:
			return failure(title, documented(t11,
				fmt.Sprintf("Secret %s not found: the running server keeps the certificate it loaded, but a restarted Pod cannot mount it until whatever issues it (the operator, cert-manager, or you) creates it again", key),
				s.reissue()...))
		}
		return failure(title, documented(t11,
			fmt.Sprintf("Secret %s not found; the operator keeps serving the certificate it loaded until it regenerates one", key),
			s.fix.rolloutRestart()))
	}

	// Any operator's Secret needs only the key pair: ca.crt is gauntlet's chart's convention.
	required := []string{keyTLSCert, keyTLSKey, keyCACert}
	if s.mode == modeUnknown {
		required = required[:2]
	}
	var missing []string
	for _, k := range required {
		if len(secret.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return failure(title, undocumented(
			fmt.Sprintf("Secret %s lacks %s (it needs %s)", key, strings.Join(missing, ", "), keyList(required)),
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
	now := s.opts.Now()
	details := []string{describeCertificate("tls.crt", leaf)}
	var expiredCA *x509.Certificate
	if len(secret.Data[keyCACert]) == 0 {
		details = append(details, "no ca.crt: the certificate's trust is judged against the caBundles only")
	} else if roots, err := certutil.ParseCertsPEM(secret.Data[keyCACert]); err != nil {
		details = append(details, "ca.crt does not parse: "+err.Error())
	} else {
		var detail string
		expiredCA, detail = judgeTrust(chain, roots, now, "tls.crt", "ca.crt")
		details = append(details, detail)
	}
	if expiredCA != nil {
		// Before the leaf's own validity: re-issuing only the leaf with this CA would not help.
		return failure(title, s.expiredCACause(fmt.Sprintf("ca.crt of Secret %s", key), expiredCA, now), details...)
	}
	if !validAt(leaf, now) {
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

// keyList is "tls.crt and tls.key" or "tls.crt, tls.key and ca.crt".
func keyList(keys []string) string {
	return strings.Join(keys[:len(keys)-1], ", ") + " and " + keys[len(keys)-1]
}

// verifyTrust checks that chain (leaf first) chains to one of roots for server auth now, as
// the API server would verify it.
func verifyTrust(chain, roots []*x509.Certificate, now time.Time) error {
	pool, intermediates := x509.NewCertPool(), x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: intermediates, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

// judgeTrust verifies chain against roots now and says how it stands, as a detail naming the
// chain and roots as chainName and rootsName. expiredCA is set when the chain's signatures lead
// to roots but a CA on the way (a root or an intermediate) is outside its validity now: the API
// server then reports "x509: certificate signed by unknown authority", and the cause is that CA's
// validity, not a foreign CA.
func judgeTrust(chain, roots []*x509.Certificate, now time.Time, chainName, rootsName string) (expiredCA *x509.Certificate, detail string) {
	err := verifyTrust(chain, roots, now)
	if err == nil {
		return nil, fmt.Sprintf("%s chains to %s", chainName, rootsName)
	}
	path := issuerPath(chain, roots)
	if ca := expiredIssuer(path, now); ca != nil {
		return ca, fmt.Sprintf("%s is signed by %s, but CA %q (serial %s) is valid from %s until %s, not now (%s)", chainName, rootsName,
			ca.Subject.CommonName, ca.SerialNumber.Text(16), ca.NotBefore.UTC().Format(time.RFC3339), ca.NotAfter.UTC().Format(time.RFC3339),
			now.UTC().Format(time.RFC3339))
	}
	if path != nil && !validAt(chain[0], now) {
		// Verify stops at the leaf's own validity; the signatures are fine, and the leaf's
		// validity is a finding of its own.
		return nil, fmt.Sprintf("%s is signed by %s (the certificate itself is outside its validity)", chainName, rootsName)
	}
	return nil, fmt.Sprintf("%s does not chain to %s: %v", chainName, rootsName, err)
}

// issuerPath follows the signatures of chain (leaf first) up to one of roots and returns the
// CA certificates on the way, the root last; nil when they lead to none of roots. It ignores
// validity periods, which is what it is for.
func issuerPath(chain, roots []*x509.Certificate) []*x509.Certificate {
	cur := chain[0]
	var path []*x509.Certificate
	for _, c := range chain[1:] {
		if cur.CheckSignatureFrom(c) != nil {
			break
		}
		path, cur = append(path, c), c
	}
	for _, r := range roots {
		if cur.Equal(r) {
			return path
		}
		if cur.CheckSignatureFrom(r) == nil {
			return append(path, r)
		}
	}
	return nil
}

// expiredIssuer is the first CA of path outside its validity at now, or nil.
func expiredIssuer(path []*x509.Certificate, now time.Time) *x509.Certificate {
	for _, ca := range path {
		if !validAt(ca, now) {
			return ca
		}
	}
	return nil
}

func validAt(c *x509.Certificate, now time.Time) bool {
	return !now.Before(c.NotBefore) && !now.After(c.NotAfter)
}

// expiredCACause is the cause when the CA that signs the serving certificate is outside its
// validity: where says where that CA was found (ca.crt of the Secret, a caBundle).
func (s *session) expiredCACause(where string, ca *x509.Certificate, now time.Time) cause {
	when := fmt.Sprintf("expired at %s", ca.NotAfter.UTC().Format(time.RFC3339))
	if now.Before(ca.NotBefore) {
		when = fmt.Sprintf("is not valid before %s", ca.NotBefore.UTC().Format(time.RFC3339))
	}
	return undocumented(fmt.Sprintf("the CA that signs the serving certificate, %q (serial %s) in %s, %s (now %s): the API server rejects the webhook's certificate with "+
		"\"x509: certificate signed by unknown authority (possibly because of \"x509: certificate has expired or is not yet valid …\")\"; "+
		"re-injecting this CA does not help, the CA and the serving certificate must be re-issued",
		ca.Subject.CommonName, ca.SerialNumber.Text(16), where, when, now.UTC().Format(time.RFC3339)), s.reissueCA()...)
}

// reissueCA is the fix for an expired CA, by mode: a new CA, a serving certificate it signs,
// and the new CA wherever the API server reads it.
func (s *session) reissueCA() []string {
	ns := s.opts.Namespace
	switch s.mode {
	case modeUnknown:
		return []string{
			fmt.Sprintf("# create a new CA, issue the serving certificate in Secret %s/%s with DNS name %s from it, and put the new CA into every webhook's caBundle, with whatever manages them (cert-manager, the operator's own cert-controller, or by hand); then:",
				ns, s.secretName, s.serviceHost()),
			s.fix.rolloutRestart(),
		}
	case certs.ModeCertManager:
		return []string{
			fmt.Sprintf("# renew the CA of the issuer that Certificate %s/%s-serving-cert names (its ca.crt expired), then re-issue the serving certificate:", ns, s.opts.Release),
			fmt.Sprintf("kubectl -n %s get certificate %s-serving-cert -o jsonpath='{.spec.issuerRef}'", ns, s.opts.Release),
			fmt.Sprintf("kubectl -n %s delete secret %s   # cert-manager re-issues it, cainjector injects the new CA", ns, s.secretName),
		}
	case certs.ModeExternal:
		return []string{
			fmt.Sprintf("# create a new CA (ca.crt), issue tls.crt with DNS name %s from it, then store both and make the webhooks trust the new CA:", s.serviceHost()),
			fmt.Sprintf("kubectl -n %s create secret generic %s --type=kubernetes.io/tls --from-file=tls.crt --from-file=tls.key --from-file=ca.crt --dry-run=client -o yaml | kubectl apply -f -",
				ns, s.secretName),
			s.fix.reinstall(`--set webhook.caBundle="$(base64 -w0 ca.crt)"`),
		}
	}
	return []string{s.fix.rolloutRestart() + "   # automatic mode generates a new CA and serving certificate when the CA has expired, and injects the new CA"}
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
