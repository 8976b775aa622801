package contract

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// restartTimeout bounds each rollout the checks make, to Available and to the old pods gone:
// Gatekeeper's three replicas start one after another on a busy machine, and each old one
// drains before it goes.
const restartTimeout = 5 * time.Minute

// certificateKeptFor is how long after a restart settles W5 keeps comparing: a new pod may make
// its first pass as the leader only once it holds the leader-election Lease, which the old pod
// releases as it stops or leaves to expire (client-go's default lease: 15 s).
const certificateKeptFor = 20 * time.Second

// firstAdmissionRestarts is how many rollout restarts W4 makes.
const firstAdmissionRestarts = 3

// restart does `kubectl rollout restart` of the target's Deployment and `kubectl rollout
// status`: it returns when the Deployment is Available with every pod of the new revision.
// Pods of the old one may still be terminating; old are their UIDs (restartSettled waits
// for them).
func restart(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed, what string) (old map[types.UID]bool) {
	t.Helper()
	ns, name := it.Namespace, it.Served.Deployment
	old, err := release.DeploymentPodUIDs(ctx, c.Kube(), ns, name)
	expect.NoError(t, err, "%s: listing the pods of Deployment %s/%s", what, ns, name)
	expect.NoError(t, release.RolloutRestart(ctx, c.Kube(), ns, name), "%s", what)
	expect.NoError(t, release.WaitDeploymentAvailable(ctx, c.Kube(), ns, name, restartTimeout), "%s: waiting for the rollout", what)
	return old
}

// restartSettled waits until none of the pods a restart replaced (old) is left, so what comes
// next meets the new pods alone: a pod of an earlier rollout still draining would close the
// API server's connection under the next restart's first admission — a rolling-restart matter
// (W9), not W4's.
func restartSettled(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed, old map[types.UID]bool, what string) {
	t.Helper()
	expect.Eventually(ctx, t, fmt.Sprintf("%s: the pods Deployment %s/%s replaced to be gone", what, it.Namespace, it.Served.Deployment), restartTimeout,
		release.DeploymentPodsReplaced(c.Kube(), it.Namespace, it.Served.Deployment, old))
}

// firstAdmission is W4: right after a rollout restart makes the Deployment Available again,
// every webhook judges its probe at the first try — no retry, no wait — across several
// restarts. A pod Ready before it serves a certificate the API server trusts, or before its
// handlers are in place, fails here; under failurePolicy Ignore it admits unjudged, silently.
func firstAdmission() e2etypes.Feature {
	var ns string
	return features.New(fmt.Sprintf("every webhook judges its first probe after each of %d rollout restarts makes the Deployment Available", firstAdmissionRestarts)).
		WithLabel(suite.LabelScenario, "W4").
		Setup(suite.NamespaceSetup(&ns, "w4")).
		Assess("before the restarts, every webhook answers", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
			return ctx
		}).
		Assess(fmt.Sprintf("%d rollout restarts, each webhook sent its probe once right after each", firstAdmissionRestarts), func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			judged, _ := probedWebhooks(it)
			var failures, rollouts []string
			for i := 1; i <= firstAdmissionRestarts; i++ {
				what := fmt.Sprintf("rollout restart %d/%d of Deployment %s/%s", i, firstAdmissionRestarts, it.Namespace, it.Served.Deployment)
				start := time.Now()
				old := restart(ctx, t, c, it, what)
				available := time.Now()
				rollouts = append(rollouts, fmt.Sprintf("%.1fs", available.Sub(start).Seconds()))
				for _, w := range judged {
					seen, err := answer(ctx, c, it, w, ns)
					expect.NoError(t, err, "reading the probe of webhook %s", w.Name)
					if seen != "" {
						failures = append(failures, fmt.Sprintf("restart %d, webhook %s (failurePolicy %s), answered %.2fs after Available: %s",
							i, w.Name, w.FailurePolicy, time.Since(available).Seconds(), seen))
					}
				}
				restartSettled(ctx, t, c, it, old, what)
			}
			suite.Note(ctx, t, "availableAfter", strings.Join(rollouts, " "))
			suite.Note(ctx, t, "failedFirstAdmissions", len(failures))
			if len(failures) > 0 {
				expect.Errorf(t, "expected every webhook to judge its first probe after each of %d restarts, saw %d fail:\n  %s",
					firstAdmissionRestarts, len(failures), strings.Join(failures, "\n  "))
			}
			return ctx
		}).Feature()
}

// restartKeepsCertificate is W5: a rollout restart keeps the serving certificate — the Service
// serves the same leaf after it, and the Secret holding it has the same data, for
// certificateKeptFor after the old pods are gone. In a
// self-managed mode the operator must reuse what it made; with cert-manager or an external
// Secret it must not write the Secret at all. A new certificate at each start leaves every
// caBundle that trusted the old one behind until something injects again.
func restartKeepsCertificate() e2etypes.Feature {
	return features.New("a rollout restart keeps the served certificate and the Secret holding it").
		WithLabel(suite.LabelScenario, "W5").
		Assess("the same certificate served, the same Secret data, after a rollout restart", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			if it.Served.Secret == "" {
				expect.Skipf(t, "the description names no Secret holding the serving certificate, and the chart mounts none")
			}
			secret := it.Namespace + "/" + it.Served.Secret
			chain, err := c.ServedCertificates(ctx, it.Namespace, it.Served.Service, it.Served.ServicePort)
			expect.NoError(t, err, "reading the certificate Service %s/%s serves before the restart", it.Namespace, it.Served.Service)
			before, err := c.Kube().CoreV1().Secrets(it.Namespace).Get(ctx, it.Served.Secret, metav1.GetOptions{})
			expect.NoError(t, err, "getting Secret %s before the restart", secret)
			servedBefore, dataBefore := chain[0], before.Data
			what := fmt.Sprintf("rollout restart of Deployment %s/%s", it.Namespace, it.Served.Deployment)
			restartSettled(ctx, t, c, it, restart(ctx, t, c, it, what), what)
			kept := fmt.Sprintf("Service %s/%s to serve the certificate it served before the restart (%s) and Secret %s to keep its data",
				it.Namespace, it.Served.Service, certificateOf(servedBefore), secret)
			err = poll.Throughout(ctx, kept, time.Second, certificateKeptFor, func(ctx context.Context) (bool, string, error) {
				chain, err := c.ServedCertificates(ctx, it.Namespace, it.Served.Service, it.Served.ServicePort)
				if err != nil {
					return false, "", err
				}
				s, err := c.Kube().CoreV1().Secrets(it.Namespace).Get(ctx, it.Served.Secret, metav1.GetOptions{})
				if err != nil {
					return false, "", fmt.Errorf("getting Secret %s: %w", secret, err)
				}
				var seen []string
				if !bytes.Equal(servedBefore.Raw, chain[0].Raw) {
					seen = append(seen, "it serves another certificate ("+certificateOf(chain[0])+")")
				}
				if changed := changedKeys(dataBefore, s.Data); len(changed) > 0 {
					seen = append(seen, "the Secret's "+strings.Join(changed, ", ")+" changed")
				}
				return len(seen) == 0, strings.Join(seen, "; "), nil
			})
			if err != nil {
				expect.Errorf(t, "%v", err)
			}
			return ctx
		}).Feature()
}

// certificateOf names a certificate by what tells two apart: serial, NotBefore, issuer and
// SHA-256 fingerprint.
func certificateOf(c *x509.Certificate) string {
	return fmt.Sprintf("serial %s, NotBefore %s, issuer %s, SHA-256 %x", c.SerialNumber, c.NotBefore.UTC().Format(time.RFC3339), c.Issuer, sha256.Sum256(c.Raw))
}

// changedKeys lists, sorted, the keys of a Secret's data that before and after do not share
// with the same value: "tls.crt", "ca.crt (added)", "tls.key (removed)".
func changedKeys(before, after map[string][]byte) []string {
	var changed []string
	for _, k := range slices.Sorted(maps.Keys(before)) {
		v, ok := after[k]
		switch {
		case !ok:
			changed = append(changed, k+" (removed)")
		case !bytes.Equal(v, before[k]):
			changed = append(changed, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[k]; !ok {
			changed = append(changed, k+" (added)")
		}
	}
	slices.Sort(changed)
	return changed
}
