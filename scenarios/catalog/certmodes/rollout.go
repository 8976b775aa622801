package certmodes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// P4's topology and how often it restarts.
const (
	rolloutReplicas = 2
	rolloutRestarts = 5
)

// restartsUnderLoad is P4: with two replicas (chart value replicas: 2), `kubectl rollout
// restart` five times in a row under P3's constant admission load fails no admission. What
// makes that hold (docs/operator.md, "Restarts without a failed admission"): the rolling update's surge
// (a new pod is Ready — serving, its certificate trusted — before an old one goes), the
// readiness probe gated on the loaded certificate, the preStop delay (shutdownDelaySeconds)
// that keeps a stopping pod serving until Service routing has left it, and the operator's drain
// (drainTimeoutSeconds), which closes the API server's kept-alive connections after a response
// and resets, never closes, the idle ones left. It runs in automatic mode, the hardest case with
// several replicas: every restart moves the leader (certificate generation and injection) to a
// new pod, and each new follower must serve the Secret's certificate before it is Ready.
func restartsUnderLoad() types.Feature {
	var ns string
	return features.New(fmt.Sprintf("%d rollout restarts of %d replicas under constant admission load fail no admission", rolloutRestarts, rolloutReplicas)).
		WithLabel(suite.LabelScenario, "P4").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		Setup(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			ns = suite.Namespace(ctx, t, "p4")
			two := *r
			two.Values = chart.MergeValues(r.Values, map[string]any{"replicas": rolloutReplicas})
			expect.NoError(t, c.Installer().Upgrade(ctx, &two), "helm upgrade of %s with replicas: %d", r, rolloutReplicas)
			expect.NoError(t, c.Installer().WaitReady(ctx, &two, rolloutTimeout), "waiting for %s with %d replicas", r, rolloutReplicas)
			if n := len(operatorPodUIDs(ctx, t, c, r)); n != rolloutReplicas {
				expect.Fatalf(t, "%s upgraded with replicas: %d: expected %d operator pods, saw %d", r, rolloutReplicas, rolloutReplicas, n)
			}
			return ctx
		})).
		Assess(fmt.Sprintf("%d × kubectl rollout restart under %d dry-run creates per second", rolloutRestarts, reliabilityLoadRate),
			suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
				load := startAdmissionLoad(ctx, c, ns, reliabilityLoadRate)
				defer load.ExpectNoFailures(ctx, t, fmt.Sprintf("through %d rollout restarts of %d replicas", rolloutRestarts, rolloutReplicas))
				_ = poll.Sleep(ctx, "the admission load to be answered before the first rollout restart", reliabilityLoadMargin)
				if sent, _ := load.Counts(); sent == 0 {
					expect.Fatalf(t, "admission load: expected answers within %s, saw none (%s)", reliabilityLoadMargin, load)
				}
				var took []float64
				for i := range rolloutRestarts {
					start := time.Now()
					before := operatorPodUIDs(ctx, t, c, r)
					expect.NoError(t, release.RolloutRestart(ctx, c.Kube(), r.Namespace, r.DeploymentName()), "rollout restart %d/%d", i+1, rolloutRestarts)
					expect.Eventually(ctx, t, fmt.Sprintf("rollout restart %d/%d of Deployment %s/%s to replace both pods", i+1, rolloutRestarts, r.Namespace, r.DeploymentName()),
						rolloutTimeout, release.PodsReplaced(c.Kube(), r, before))
					expect.NoError(t, release.WaitDeploymentAvailable(ctx, c.Kube(), r.Namespace, r.DeploymentName(), rolloutTimeout), "after rollout restart %d/%d", i+1, rolloutRestarts)
					took = append(took, round3(time.Since(start).Seconds()))
					t.Logf("rollout restart %d/%d done in %.1fs; load so far: %s", i+1, rolloutRestarts, time.Since(start).Seconds(), load)
				}
				_ = poll.Sleep(ctx, "the admission load to run on past the last rollout restart", reliabilityLoadMargin)
				suite.Note(ctx, t, "restarts", len(took))
				suite.Note(ctx, t, "restartSeconds", took)
				return ctx
			})).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			restored := *r
			expect.NoError(t, c.Installer().Upgrade(ctx, &restored), "restoring %s with helm upgrade", r)
			expect.NoError(t, c.Installer().WaitReady(ctx, &restored, rolloutTimeout), "waiting for the restored %s", r)
			return ctx
		})).
		Feature()
}
