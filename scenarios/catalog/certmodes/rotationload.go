package certmodes

import (
	"context"
	"crypto/x509"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// The constant admission load of P3 and P4 (startAdmissionLoad: server-side dry-run creates of
// a valid DynamoGraphDeployment through both webhooks, open loop), and how long it runs before
// the first change and after the last one.
const (
	reliabilityLoadRate   = 50
	reliabilityLoadMargin = 2 * time.Second
)

// rotations is how many certificate rotations P3 puts the load through, in either mode.
const rotations = 10

// Short certificate timings of P3's automatic-mode release; webhook.caPropagation keeps the
// chart's default, the protocol users run. A generated certificate (CA and serving certificate
// alike) falls within the look-ahead validity − lookAhead = 6 s after it was made, so the
// leader replaces both at its next check (every second) — a rotation every 6–7 s, since the
// validity counts from the generation, not from the store — through the real path: trust the new
// CA beside the old one, keep serving the old certificate for caPropagation, store the Secret,
// serve the new files, drop the old CA 2 × caPropagation + one check interval after the
// injection. The look-ahead leaves the old certificate valid for lookAhead − caPropagation
// (9 s with the default 5 s) after the new one is due, enough for a loaded machine's slow
// passes: with 12 s and 8 s, a run beside two CPU-bound workers served a certificate 3 s past
// its notAfter (x509: certificate has expired).
const (
	shortValidity      = 20 * time.Second
	shortLookAhead     = 14 * time.Second
	shortCheckInterval = time.Second
	// shortRotationPeriod is validity − lookAhead: the next rotation begins at most one check
	// interval later than that after a generation, and stores its certificate caPropagation
	// after it began.
	shortRotationPeriod = shortValidity - shortLookAhead
)

var shortRotationValues = map[string]any{"webhook": map[string]any{
	"certificateValidity": map[string]any{"ca": shortValidity.String(), "server": shortValidity.String(), "lookAhead": shortLookAhead.String()},
	"checkInterval":       shortCheckInterval.String(),
}}

// rotation is one observed change of the Secret: the new certificates, when the change was
// seen, and how long after that the webhook Service served the new certificate.
type rotation struct {
	certs      pki.SecretCertificates
	caChanged  bool
	seen       time.Time
	servedWait time.Duration
}

// rotationsUnderLoad is P3: a constant admission load runs through ten certificate rotations
// and none of its requests fails. Automatic mode: the release is upgraded to short validities
// so the operator itself rotates CA and serving certificate every few seconds. cert-manager
// mode: ten renewals of the serving certificate, each triggered as `cmctl renew` does (C8's
// trigger) and served before the next. One feature for both modes (an ID appears once per
// suite); the release's mode picks the driver.
func rotationsUnderLoad() types.Feature {
	var ns string
	var pods podGeneration
	return features.New(fmt.Sprintf("%d certificate rotations under constant admission load fail no admission", rotations)).
		WithLabel(suite.LabelScenario, "P3").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		WithLabel(suite.LabelCertMode, string(chart.CertManager)).
		Setup(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			ns = suite.Namespace(ctx, t, "p3")
			switch r.Mode {
			case chart.Automatic:
				startShortRotations(ctx, t, c, r)
			case chart.CertManager:
				expect.NoError(t, certmanager.WaitObjectReady(ctx, c.RESTConfig(), cmv1.CertificateKind, r.Namespace, r.ServingCertificateName(), issuanceTimeout), "before the renewals")
				expectServedWithin(ctx, t, c, r, mustReadSecret(ctx, t, c, r).Leaf, issuanceTimeout)
			default:
				expect.Fatalf(t, "P3 rotates certificates in automatic or cert-manager mode; %s is neither", r)
			}
			expectAdmission(ctx, t, c, r, "before the rotations")
			pods = snapshotPods(ctx, t, c, r)
			return ctx
		})).
		Assess(fmt.Sprintf("%d rotations under %d dry-run creates per second: every rotation served, no admission failed", rotations, reliabilityLoadRate),
			suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
				load := startAdmissionLoad(ctx, c, ns, reliabilityLoadRate)
				defer load.ExpectNoFailures(ctx, t, fmt.Sprintf("through %d certificate rotations", rotations))
				_ = poll.Sleep(ctx, "the admission load to be answered before the first rotation", reliabilityLoadMargin)
				if sent, _ := load.Counts(); sent == 0 {
					expect.Fatalf(t, "admission load: expected answers within %s, saw none (%s)", reliabilityLoadMargin, load)
				}
				var seen []rotation
				switch r.Mode {
				case chart.Automatic:
					seen = followAutomaticRotations(ctx, t, c, r)
				case chart.CertManager:
					seen = renewRepeatedly(ctx, t, c, r)
				}
				_ = poll.Sleep(ctx, "the admission load to run on past the last rotation", reliabilityLoadMargin)
				noteRotations(ctx, t, seen)
				return ctx
			})).
		Assess("no operator pod restarted", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectSamePods(ctx, t, c, r, pods, "through the rotations")
			return ctx
		})).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			if r.Mode == chart.Automatic {
				restoreLongValidity(ctx, t, c, r)
			}
			return ctx
		})).
		Feature()
}

// startShortRotations upgrades the release to shortRotationValues and makes the operator
// generate its first short-lived certificate: the long-lived one in the Secret still passes
// the new look-ahead, so the Secret is deleted and the leader regenerates at once (T11's path).
// It returns once the Secret holds a short-lived certificate that the Service serves.
func startShortRotations(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) {
	t.Helper()
	short := *r
	short.Values = chart.MergeValues(r.Values, shortRotationValues)
	expect.NoError(t, c.Installer().Upgrade(ctx, &short), "helm upgrade of %s with short certificate validities %v", r, shortRotationValues)
	expect.NoError(t, c.Installer().WaitReady(ctx, &short, rolloutTimeout), "waiting for %s with short certificate validities", r)
	err := c.Kube().CoreV1().Secrets(r.Namespace).Delete(ctx, r.SecretName(), metav1.DeleteOptions{})
	expect.NoError(t, err, "deleting Secret %s/%s so the operator generates a short-lived certificate", r.Namespace, r.SecretName())
	var s pki.SecretCertificates
	what := fmt.Sprintf("Secret %s/%s to hold a certificate valid for less than a minute (webhook.certificateValidity.server %s)", r.Namespace, r.SecretName(), shortValidity)
	expect.Eventually(ctx, t, what, convergeTimeout, func(ctx context.Context) (bool, string, error) {
		got, err := release.ReadSecretCertificates(ctx, c.Kube(), r)
		if err != nil {
			return false, err.Error(), nil
		}
		s = got
		return time.Until(got.Leaf.NotAfter) < time.Minute, pki.Describe(got.Leaf).String(), nil
	})
	t.Logf("the operator generated %s; a rotation begins every %s–%s (each stored caPropagation later) from now on", s, shortRotationPeriod, shortRotationPeriod+shortCheckInterval)
}

// restoreLongValidity upgrades the release back to its own values and waits until the Secret
// holds a long-lived certificate again (the restored operator replaces the short-lived one,
// which is within its look-ahead) and admission works, for the scenarios after P3.
func restoreLongValidity(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) {
	t.Helper()
	restored := *r
	expect.NoError(t, c.Installer().Upgrade(ctx, &restored), "restoring %s with helm upgrade", r)
	expect.NoError(t, c.Installer().WaitReady(ctx, &restored, rolloutTimeout), "waiting for the restored %s", r)
	var s pki.SecretCertificates
	what := fmt.Sprintf("Secret %s/%s to hold a long-lived certificate again after restoring %s", r.Namespace, r.SecretName(), r)
	expect.Eventually(ctx, t, what, convergeTimeout, func(ctx context.Context) (bool, string, error) {
		got, err := release.ReadSecretCertificates(ctx, c.Kube(), r)
		if err != nil {
			return false, err.Error(), nil
		}
		s = got
		return time.Until(got.Leaf.NotAfter) > time.Hour, pki.Describe(got.Leaf).String(), nil
	})
	expectServedWithin(ctx, t, c, r, s.Leaf, convergeTimeout)
	expectAdmission(ctx, t, c, r, "after restoring "+r.String())
}

// followAutomaticRotations waits for the operator's next rotations and checks each: CA and
// serving certificate both new, and served through the webhook Service before the next
// rotation is due.
func followAutomaticRotations(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) []rotation {
	t.Helper()
	propagation, err := r.CAPropagation()
	expect.NoError(t, err, "reading the release's CA propagation")
	prev := mustReadSecret(ctx, t, c, r)
	var out []rotation
	for i := range rotations {
		next := waitSecretChanged(ctx, t, c, r, prev, shortRotationPeriod+propagation+2*shortCheckInterval+convergeTimeout/4,
			fmt.Sprintf("rotation %d/%d (webhook.certificateValidity %s, lookAhead %s, checkInterval %s, caPropagation %s: one is generated every %s–%s and stored caPropagation after it)",
				i+1, rotations, shortValidity, shortLookAhead, shortCheckInterval, propagation, shortRotationPeriod, shortRotationPeriod+shortCheckInterval))
		next.caChanged = !next.certs.CA.Equal(prev.CA)
		if !next.caChanged {
			expect.Errorf(t, "rotation %d/%d: expected a new CA with the new serving certificate (automatic mode rotates both), saw the CA %s kept", i+1, rotations, pki.Describe(prev.CA))
		}
		next.servedWait = waitServedBeforeNext(ctx, t, c, r, next.certs.Leaf, shortRotationPeriod, i)
		out = append(out, next)
		prev = next.certs
	}
	return out
}

// renewRepeatedly triggers a cert-manager renewal, waits until the Secret holds the renewed
// certificate and the Service serves it, and does that rotations times. The chart's own chain
// renews only the serving certificate: the CA must stay.
func renewRepeatedly(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) []rotation {
	t.Helper()
	prev := mustReadSecret(ctx, t, c, r)
	revision := waitIssued(ctx, t, c, r, 0)
	var out []rotation
	for i := range rotations {
		triggerRenewal(ctx, t, c, r, "P3")
		next := waitSecretChanged(ctx, t, c, r, prev, issuanceTimeout, fmt.Sprintf("renewal %d/%d (Issuing condition set as `cmctl renew` does)", i+1, rotations))
		next.caChanged = !next.certs.CA.Equal(prev.CA)
		if next.caChanged {
			expect.Errorf(t, "renewal %d/%d: expected the same CA (the chart's chain renews only the serving certificate), saw CA %s instead of %s",
				i+1, rotations, pki.Describe(next.certs.CA), pki.Describe(prev.CA))
		}
		start := time.Now()
		expectServedWithin(ctx, t, c, r, next.certs.Leaf, issuanceTimeout)
		next.servedWait = time.Since(start)
		out = append(out, next)
		prev = next.certs
		revision = waitIssued(ctx, t, c, r, revision)
	}
	return out
}

// waitSecretChanged waits until the Secret holds a serving certificate other than prev's.
func waitSecretChanged(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, prev pki.SecretCertificates, timeout time.Duration, which string) rotation {
	t.Helper()
	var next pki.SecretCertificates
	what := fmt.Sprintf("Secret %s/%s to hold a new serving certificate for %s (current: %s)", r.Namespace, r.SecretName(), which, prev)
	expect.Eventually(ctx, t, what, timeout, func(ctx context.Context) (bool, string, error) {
		s, err := release.ReadSecretCertificates(ctx, c.Kube(), r)
		if err != nil {
			return false, err.Error(), nil
		}
		next = s
		return !s.Leaf.Equal(prev.Leaf), "still " + s.String(), nil
	})
	return rotation{certs: next, seen: time.Now()}
}

// waitServedBeforeNext waits until the webhook Service serves leaf, at most until the next
// rotation is due (period), and returns how long that took.
func waitServedBeforeNext(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, leaf *x509.Certificate, period time.Duration, i int) time.Duration {
	t.Helper()
	start := time.Now()
	what := fmt.Sprintf("Service %s/%s to serve the certificate of rotation %d/%d (serial %s) before the next rotation is due (%s)",
		r.Namespace, r.ServiceName(), i+1, rotations, pki.SerialHex(leaf), period)
	expect.Eventually(ctx, t, what, period, func(ctx context.Context) (bool, string, error) {
		got, err := servedLeaf(ctx, c, r)
		if err != nil {
			return false, err.Error(), nil
		}
		return got.Equal(leaf), "served " + pki.Describe(got).String(), nil
	})
	return time.Since(start)
}

// noteRotations puts the rotations into the scenario's details: how many, how many changed
// the CA, the time between them and how long the Service took to serve each.
func noteRotations(ctx context.Context, t *testing.T, seen []rotation) {
	t.Helper()
	if len(seen) == 0 {
		return
	}
	caChanges := 0
	var served, between []float64
	for i, s := range seen {
		served = append(served, round3(s.servedWait.Seconds()))
		if s.caChanged {
			caChanges++
		}
		if i > 0 {
			between = append(between, round3(s.seen.Sub(seen[i-1].seen).Seconds()))
		}
	}
	suite.Note(ctx, t, "rotations", len(seen))
	suite.Note(ctx, t, "caChanges", caChanges)
	if len(between) > 0 {
		suite.Note(ctx, t, "secondsBetweenRotations", between)
	}
	suite.Note(ctx, t, "servedAfterSecondsMax", slices.Max(served))
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
