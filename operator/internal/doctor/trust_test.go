package doctor

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Trust is judged now, as the API server judges it: not at some moment inside the leaf's
// validity. An expired CA is a cause of its own, not "a caBundle from another CA".

// expiredCARelease is an external-mode release whose serving certificate is valid now but was
// signed by a CA that expired yesterday; the Secret's ca.crt and every caBundle hold that CA.
func expiredCARelease(t *testing.T, now time.Time) *release {
	r := newRelease(t)
	r.mode = "external"
	r.ca = newCAValid(t, "expired-ca", now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	r.serving = r.ca.validFor(t, r.host())
	return r
}

// notAfter is how a certificate's NotAfter is printed (X.509 keeps whole seconds).
func notAfter(t time.Time) string { return t.UTC().Truncate(time.Second).Format(time.RFC3339) }

func TestExpiredCAIsItsOwnCause(t *testing.T) {
	now := time.Now()
	r := expiredCARelease(t, now)
	report := runChecks(context.Background(), fakeDoctor(t, r, r.objects(t), now), checksByID(t, staticChecks...))
	root := requireOneRoot(t, report, CheckSecret, "",
		[]string{`"expired-ca"`, "ca.crt of Secret dynamo-system/webhook-server-cert", "expired at " + notAfter(now.Add(-24*time.Hour)),
			"the CA and the serving certificate must be re-issued"},
		[]string{"create a new CA (ca.crt), issue tls.crt with DNS name dynamo-webhook-service.dynamo-system.svc",
			"kubectl -n dynamo-system create secret generic webhook-server-cert", `--set webhook.caBundle="$(base64 -w0 ca.crt)"`})
	assert.NotContains(t, root.Cause, "another CA")
	details := strings.Join(root.Details, "\n")
	assert.Contains(t, details, `tls.crt is signed by ca.crt, but CA "expired-ca"`)
	assert.NotContains(t, details, "chains to ca.crt")
	res, _ := report.Find(CheckCABundle)
	assert.NotEqual(t, StatusFail, res.Status, "the caBundle check must not name T3: %s", res.Cause)
}

func TestExpiredCAFixByMode(t *testing.T) {
	now := time.Now()
	for mode, want := range map[string]string{
		"automatic":    "rollout restart deployment/dynamo-operator",
		"cert-manager": "renew the CA of the issuer that Certificate dynamo-system/dynamo-serving-cert names",
	} {
		t.Run(mode, func(t *testing.T) {
			r := expiredCARelease(t, now)
			r.mode = mode
			report := runChecks(context.Background(), fakeDoctor(t, r, r.objects(t), now), checksByID(t, staticChecks...))
			requireOneRoot(t, report, CheckSecret, "", []string{"expired at"}, []string{want})
		})
	}
}

// A CA renewed with the same key: the Secret carries the renewed CA, the caBundle still the
// expired one. The Secret is fine; the caBundle holds an expired CA, which is what to say.
func TestExpiredCAInTheCABundleOnly(t *testing.T) {
	now := time.Now()
	r := newRelease(t)
	r.mode = "external"
	old := r.ca.renewed(t, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	objs := editWebhooks(t, r, r.objects(t), func(h webhookFields) { h.clientConfig.CABundle = old.pem })
	report := runChecks(context.Background(), fakeDoctor(t, r, objs, now), checksByID(t, staticChecks...))
	requireOneRoot(t, report, CheckCABundle, "",
		[]string{"the caBundle of all 6 webhooks", `"dynamo-webhook-service-ca"`, "expired at " + notAfter(now.Add(-24*time.Hour))},
		[]string{`--set webhook.caBundle="$(base64 -w0 ca.crt)"`})
}

// The served-certificate check alone (no Secret check before it) tells an expired CA in the
// caBundle from a foreign one.
func TestServedCertificateSignedByAnExpiredCA(t *testing.T) {
	now := time.Now()
	r := expiredCARelease(t, now)
	r.servicePort = serveSecret(t, r)
	objs := pointEndpointAt(t, r, r.objects(t), closedPort(t))
	d := fakeDoctor(t, r, objs, now)
	d.opts.DialTimeout = time.Second
	report := runChecks(context.Background(), d, checksByID(t, append([]string{CheckDeployment}, handshakeChecks...)...))
	root := requireOneRoot(t, report, CheckServingCertificate, "", []string{`"expired-ca"`, "expired at " + notAfter(now.Add(-24*time.Hour))},
		[]string{`--set webhook.caBundle=`})
	assert.NotContains(t, root.Cause, "does not trust")

	// With the Secret check first, that check is the one root cause.
	report = runChecks(context.Background(), d, checksByID(t, append([]string{CheckSecret}, handshakeChecks...)...))
	requireOneRoot(t, report, CheckSecret, "", []string{"expired at"}, nil)
	res, _ := report.Find(CheckServingCertificate)
	assert.Equal(t, StatusConsequence, res.Status)
}

// A wrong-SAN leaf that outlives its CA's first half-life: its trust is judged now (it chains),
// not at the middle of the leaf's validity (when the CA has expired).
func TestWrongSANDetailsJudgeTrustNow(t *testing.T) {
	now := time.Now()
	r := newRelease(t)
	r.mode = "external"
	r.ca = newCAValid(t, "short-lived-ca", now.Add(-time.Hour), now.Add(30*24*time.Hour))
	r.serving = r.ca.issue(t, []string{"wrong.dynamo-system.svc"}, now.Add(-time.Hour), now.Add(365*24*time.Hour))
	report := runChecks(context.Background(), fakeDoctor(t, r, r.objects(t), now), checksByID(t, staticChecks...))
	root := requireOneRoot(t, report, CheckSecret, "T4", []string{"is valid for wrong.dynamo-system.svc"}, nil)
	details := strings.Join(root.Details, "\n")
	assert.Contains(t, details, "tls.crt chains to ca.crt")
	assert.NotContains(t, details, "does not chain")
}

func TestExpiredLeafIsSignedByItsCA(t *testing.T) {
	now := time.Now()
	r := newRelease(t)
	r.mode = "external"
	r.serving = r.ca.issue(t, []string{r.host()}, now.Add(-3*time.Hour), now.Add(-2*time.Hour))
	report := runChecks(context.Background(), fakeDoctor(t, r, r.objects(t), now), checksByID(t, staticChecks...))
	root := requireOneRoot(t, report, CheckSecret, "T5", nil, nil)
	assert.Contains(t, strings.Join(root.Details, "\n"), "tls.crt is signed by ca.crt (the certificate itself is outside its validity)")
}

func TestDryRunFailureWithAnExpiredCA(t *testing.T) {
	const text = `Internal error occurred: failed calling webhook "vdynamographdeployment.nvidia.com": failed to call webhook: Post "https://dynamo-webhook-service.dynamo-system.svc:443/validate?timeout=10s": ` +
		`tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because of "x509: certificate has expired or is not yet valid: current time 2026-01-02T00:00:00Z is after 2026-01-01T00:00:00Z" while trying to verify candidate authority certificate "expired-ca")`
	r := newRelease(t)
	s := &session{Doctor: fakeDoctor(t, r, r.objects(t), time.Now()), facts: defaultFacts(Options{Release: "dynamo", Namespace: "dynamo-system", Chart: DefaultChart})}
	withConfigurations(t, s, r)
	c := s.callFailure("the dry-run create", errors.New(text))
	assert.Empty(t, c.scenario, "not T3: the CA is the right one, but expired")
	assert.Contains(t, c.text, `the CA "expired-ca" the caBundle holds is outside its validity`)
	assert.Contains(t, c.fix, "generates a new CA")
}

// Go reports a chain whose only candidate root expired as "certificate has expired", with the
// root's NotAfter: that time tells the CA from the serving certificate.
func TestDryRunFailureNamingTheCAsNotAfter(t *testing.T) {
	now := time.Now()
	r := expiredCARelease(t, now)
	s := &session{Doctor: fakeDoctor(t, r, r.objects(t), now), facts: defaultFacts(Options{Release: "dynamo", Namespace: "dynamo-system", Chart: DefaultChart})}
	withConfigurations(t, s, r)
	s.bundles = []trustBundle{{roots: []*x509.Certificate{r.ca.cert}, webhooks: []string{"vdynamographdeployment.nvidia.com"}}}
	const post = `Internal error occurred: failed calling webhook "vdynamographdeployment.nvidia.com": failed to call webhook: Post "https://dynamo-webhook-service.dynamo-system.svc:443/validate?timeout=10s": tls: failed to verify certificate: `
	text := post + "x509: certificate has expired or is not yet valid: current time " + now.UTC().Format(time.RFC3339) + " is after " + notAfter(r.ca.cert.NotAfter)
	c := s.callFailure("the dry-run create", errors.New(text))
	assert.Empty(t, c.scenario, "not T5: the serving certificate is valid, its CA is not")
	assert.Contains(t, c.text, `that is the NotAfter of CA "expired-ca" in the caBundle`)

	// The serving certificate's own NotAfter: T5, as before.
	text = post + "x509: certificate has expired or is not yet valid: current time " + now.UTC().Format(time.RFC3339) + " is after " + notAfter(now.Add(-time.Hour))
	assert.Equal(t, "T5", s.callFailure("the dry-run create", errors.New(text)).scenario)
}
