package certmodes

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/metrics"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// The fresh install's startup log lines, in the order C1 expects them.
const (
	msgSecretNotFound         = "cert-controller: Secret not found; waiting for the leader to create it"
	msgNoUsableCertificateYet = "cert-controller: no usable certificate in the Secret yet; serving starts once the leader has stored one"
	msgElectedLeader          = "cert-controller: elected leader: this replica keeps the Secret and the caBundles right"
	msgSecretCreated          = "cert-controller: created Secret with a new CA and serving certificate"
)

// validitySlack is how far a certificate's lifetime may be from the configured one: the
// operator backdates notBefore (clock skew) and a little time passes between generating the
// certificate and storing the Secret.
const validitySlack = 10 * time.Minute

// freshInstall is C1: after a fresh install in automatic mode the operator has created the
// Secret, with certificates valid as configured for the Service's DNS name, and injected its CA
// everywhere the API server needs it.
func freshInstall() types.Feature {
	return features.New("fresh install creates the Secret and injects the CA everywhere").
		WithLabel(suite.LabelScenario, "C1").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		Assess("the Secret is kubernetes.io/tls with tls.crt, tls.key and ca.crt", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			s, err := c.Kube().CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{})
			expect.NoError(t, err, "getting Secret %s/%s", r.Namespace, r.SecretName())
			expect.Equal(t, "type of Secret "+r.Namespace+"/"+r.SecretName(), corev1.SecretTypeTLS, s.Type)
			var empty []string
			for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey, "ca.crt"} {
				if len(s.Data[k]) == 0 {
					empty = append(empty, k)
				}
			}
			if len(empty) > 0 {
				expect.Errorf(t, "Secret %s/%s: expected non-empty tls.crt, tls.key and ca.crt, saw %v missing or empty (keys: %v)", r.Namespace, r.SecretName(), empty, keys(s.Data))
			}
			return ctx
		})).
		Assess("the CA and the serving certificate are valid for the configured time, with random serial numbers", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			s := mustReadSecret(ctx, t, c, r)
			caValidity, serverValidity, err := r.CertificateValidity()
			expect.NoError(t, err, "reading the configured validity")
			created := s.Secret.CreationTimestamp.Time
			expectLifetime(t, "CA certificate (ca.crt)", s.CA, created, caValidity)
			// The operator never lets the serving certificate outlive its CA.
			expectLifetime(t, "serving certificate (tls.crt)", s.Leaf, created, min(serverValidity, s.CA.NotAfter.Sub(created)))
			if !s.CA.IsCA {
				expect.Errorf(t, "ca.crt: expected a CA certificate, saw %s", pki.Describe(s.CA))
			}
			expectRandomSerials(t, s)
			return ctx
		})).
		Assess("the serving certificate names <svc>.<ns>.svc and chains to ca.crt", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			s := mustReadSecret(ctx, t, c, r)
			if !slices.Contains(s.Leaf.DNSNames, r.ServiceHost()) {
				expect.Errorf(t, "serving certificate: expected SAN %s, saw SANs %v", r.ServiceHost(), s.Leaf.DNSNames)
			}
			roots := x509.NewCertPool()
			roots.AddCert(s.CA)
			if _, err := s.Leaf.Verify(x509.VerifyOptions{DNSName: r.ServiceHost(), Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				expect.Errorf(t, "serving certificate: expected it to verify for %s against ca.crt, saw %v", r.ServiceHost(), err)
			}
			return ctx
		})).
		Assess("every validating and mutating webhook and the DGDR conversion carry the CA", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			s := mustReadSecret(ctx, t, c, r)
			expectCABundles(ctx, t, c, r, s.Secret.Data["ca.crt"])
			return ctx
		})).
		Assess("the webhook Service serves the Secret's certificate", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectServed(ctx, t, c, r, mustReadSecret(ctx, t, c, r).Leaf)
			return ctx
		})).
		Assess("the operator's log tells its start: no usable certificate, waiting for the leader; elected; Secret created; certificate loaded; webhook server started", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			pods, err := release.OperatorPods(ctx, c.Kube(), r)
			expect.NoError(t, err, "listing the operator's pods")
			if len(pods) != 1 {
				expect.Fatalf(t, "expected the one operator pod of a fresh install with the chart's defaults, saw %d", len(pods))
			}
			// Every replica starts as a follower: before the manager runs, it finds no usable
			// certificate and says serving waits for the leader; then it wins the election and
			// creates the Secret. That the Secret was not found is said only when the follower's
			// read of it succeeded before the election: on kind the pod's first API request may
			// fail, and the leader has created the Secret by the next read. So that line may
			// come, once and before the election, but the promise is the rest.
			expectLogSequence(ctx, t, c, pods[0],
				logStep{always: []string{msgNoUsableCertificateYet}, maybe: []string{msgSecretNotFound}},
				logStep{always: []string{msgElectedLeader}},
				logStep{always: []string{msgSecretCreated}},
				logStep{always: []string{msgCertificateLoaded}},
				logStep{always: []string{msgWebhookServerStarting}})
			return ctx
		})).
		Assess("every operator pod reports the served certificate's expiry ("+certificateNotAfterMetric+")", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectExpiryReported(ctx, t, c, r, mustReadSecret(ctx, t, c, r).Leaf)
			return ctx
		})).
		Feature()
}

// certificateNotAfterMetric is the gauge an operator sets to the notAfter (Unix seconds) of the
// certificate its webhook server has loaded: what an expiry alert is written against.
const certificateNotAfterMetric = "dynamo_webhook_certificate_not_after_seconds"

// expectExpiryReported scrapes every operator pod of r (HTTPS, a token allowed to get
// /metrics) until each reports leaf's notAfter in certificateNotAfterMetric.
func expectExpiryReported(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, leaf *x509.Certificate) {
	t.Helper()
	want := leaf.NotAfter.Unix()
	reader := metrics.NewReader(c.Kube(), r)
	expect.Eventually(ctx, t, fmt.Sprintf("every operator pod to report %s %d (the served certificate's notAfter, %s)", certificateNotAfterMetric, want, leaf.NotAfter.UTC().Format(time.RFC3339)), convergeTimeout,
		func(ctx context.Context) (bool, string, error) {
			scrapes, err := reader.ScrapeReadyOperators(ctx, c.DialPod)
			if err != nil {
				return false, err.Error(), nil
			}
			var seen []string
			ok := true
			for _, s := range scrapes {
				if s.Err != nil {
					ok = false
					seen = append(seen, fmt.Sprintf("%s: %v", s.Pod, s.Err))
					continue
				}
				got, present := s.Samples.Value(certificateNotAfterMetric)
				if !present || int64(got) != want {
					ok = false
				}
				seen = append(seen, fmt.Sprintf("%s: %s", s.Pod, describeGauge(got, present)))
			}
			return ok && len(seen) > 0, strings.Join(seen, "; "), nil
		})
}

func describeGauge(v float64, present bool) string {
	if !present {
		return "no sample"
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + " (" + time.Unix(int64(v), 0).UTC().Format(time.RFC3339) + ")"
}

// expectLifetime checks that cert expires validity after the Secret was created.
func expectLifetime(t *testing.T, what string, cert *x509.Certificate, created time.Time, validity time.Duration) {
	t.Helper()
	got := cert.NotAfter.Sub(created)
	if d := got - validity; d < -validitySlack || d > validitySlack {
		expect.Errorf(t, "%s: expected a lifetime of %s (±%s) from the Secret's creation at %s, saw notAfter %s (%s)",
			what, validity, validitySlack, created.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339), got.Round(time.Minute))
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// minSerialBits is how many bits a random serial number has at the least but with a chance of
// 2^-64 (the operator draws 128): RFC 5280 §4.1.2.2 wants serials unique per issuer and
// positive, and the CA/Browser Forum asks for 64 bits of randomness.
const minSerialBits = 64

// expectRandomSerials checks that the CA's and the serving certificate's serial numbers are
// positive, random-sized and different.
func expectRandomSerials(t *testing.T, s pki.SecretCertificates) {
	t.Helper()
	for _, c := range []struct {
		what string
		cert *x509.Certificate
	}{{"ca.crt", s.CA}, {"tls.crt", s.Leaf}} {
		if n := c.cert.SerialNumber; n.Sign() <= 0 || n.BitLen() < minSerialBits {
			expect.Errorf(t, "%s: expected a positive random serial number of at least %d bits, saw %s (%d bits)", c.what, minSerialBits, pki.SerialHex(c.cert), n.BitLen())
		}
	}
	if s.CA.SerialNumber.Cmp(s.Leaf.SerialNumber) == 0 {
		expect.Errorf(t, "expected the CA and the serving certificate to have different serial numbers, saw %s for both", pki.SerialHex(s.CA))
	}
}

// beforeRestart records the Secret's certificates and the operator's pods, for a check that
// restarts the operator.
func beforeRestart(certs *pki.SecretCertificates, pods *map[k8stypes.UID]bool) features.Func {
	return suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
		*certs = mustReadSecret(ctx, t, c, r)
		*pods = operatorPodUIDs(ctx, t, c, r)
		return ctx
	})
}

// restartKeepsCertificate is C2: restarting the operator while its Secret is valid reuses the
// certificate instead of generating a new one.
func restartKeepsCertificate() types.Feature {
	var before pki.SecretCertificates
	var pods map[k8stypes.UID]bool
	return features.New("operator restart with a valid Secret keeps the certificate").
		WithLabel(suite.LabelScenario, "C2").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		Setup(beforeRestart(&before, &pods)).
		Assess("rollout restart replaces every operator pod", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			restartOperator(ctx, t, c, r, pods)
			return ctx
		})).
		Assess("the Secret keeps the same CA and serving certificate (serial numbers)", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			after := mustReadSecret(ctx, t, c, r)
			if !after.Leaf.Equal(before.Leaf) || !after.CA.Equal(before.CA) {
				expect.Errorf(t, "Secret %s/%s after the restart: expected %s (no regeneration), saw %s", r.Namespace, r.SecretName(), before, after)
			}
			return ctx
		})).
		Assess("the new pod serves the same certificate and admission works", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectServed(ctx, t, c, r, before.Leaf)
			expect.NoError(t, release.WaitAdmission(ctx, c.Dynamic(), r, admissionTimeout), "admission after the restart")
			return ctx
		})).
		Assess("every caBundle holds the CA once: a starting pod adds trust only where it is missing", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			bundles, err := release.ReadCABundles(ctx, c.Kube(), c.CRDs(), r)
			expect.NoError(t, err, "reading the caBundles of %s", r)
			if repeated := bundles.Repeated(before.CA); len(repeated) > 0 {
				expect.Errorf(t, "expected every caBundle of %s to hold the CA (serial %s) once after the restart; saw %s", r, pki.SerialHex(before.CA), strings.Join(repeated, "; "))
			}
			return ctx
		})).
		Feature()
}

// deletedSecretRegenerated is C3, the documented recovery: delete the Secret and restart the
// operator; it generates a new certificate, updates every caBundle, and admission works again.
func deletedSecretRegenerated() types.Feature {
	var before pki.SecretCertificates
	var pods map[k8stypes.UID]bool
	var after pki.SecretCertificates
	return features.New("deleted Secret plus rollout restart regenerates the certificate").
		WithLabel(suite.LabelScenario, "C3").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		Setup(beforeRestart(&before, &pods)).
		Assess("kubectl delete secret + rollout restart yields a new CA and certificate", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			err := c.Kube().CoreV1().Secrets(r.Namespace).Delete(ctx, r.SecretName(), metav1.DeleteOptions{})
			expect.NoError(t, err, "deleting Secret %s/%s", r.Namespace, r.SecretName())
			restartOperator(ctx, t, c, r, pods)
			what := fmt.Sprintf("Secret %s/%s to be recreated with a new CA and certificate (old: %s)", r.Namespace, r.SecretName(), before)
			expect.Eventually(ctx, t, what, convergeTimeout, func(ctx context.Context) (bool, string, error) {
				s, err := release.ReadSecretCertificates(ctx, c.Kube(), r)
				if err != nil {
					return false, err.Error(), nil
				}
				after = s
				return !s.Leaf.Equal(before.Leaf) && !s.CA.Equal(before.CA), s.String(), nil
			})
			return ctx
		})).
		Assess("every caBundle holds the new CA", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectCABundles(ctx, t, c, r, after.Secret.Data["ca.crt"])
			return ctx
		})).
		Assess("the webhook Service serves the new certificate", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectServed(ctx, t, c, r, after.Leaf)
			return ctx
		})).
		Assess("admission works again: an invalid DynamoGraphDeployment is denied, a valid one admitted", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expect.NoError(t, release.WaitAdmission(ctx, c.Dynamic(), r, admissionTimeout), "admission after regeneration")
			ns := suite.Namespace(ctx, t, "c3")
			_, err := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, dynamo.InvalidGraphDeployment(ns, "no-services"), metav1.CreateOptions{})
			want := dynamo.DeniedBy(dynamo.GraphDeploymentValidatingWebhook)
			if err == nil || !containsAll(err.Error(), want, ns+"/no-services", "spec.services") {
				expect.Errorf(t, "creating DynamoGraphDeployment %s/no-services: expected a denial containing %q, %q and %q, saw %v", ns, want, ns+"/no-services", "spec.services", err)
			}
			_, err = c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, dynamo.GraphDeployment(ns, "graph"), metav1.CreateOptions{})
			if err != nil {
				expect.Errorf(t, "creating DynamoGraphDeployment %s/graph: expected it admitted, saw %v", ns, err)
			}
			return ctx
		})).
		Feature()
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
