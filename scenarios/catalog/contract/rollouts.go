package contract

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// rolloutRestarts is how many times W9 restarts the Deployment.
const rolloutRestarts = 5

// rolloutTimeout bounds one rollout restart: a new pod per replica, each Ready (its webhook
// server serving) before an old one goes; Gatekeeper's three replicas start one after another
// on a busy machine.
const rolloutTimeout = 5 * time.Minute

// restartsUnderLoad is W9: at the replica count the chart gives users, `kubectl rollout restart`
// of the Deployment behind the webhook Service, five times in a row, each waited for until the
// rollout is done, the Deployment Available and the old pods gone, under a constant load of
// judged admissions:
// none fails. What makes that hold is the target's — a new pod Ready only once it serves, a
// stopping pod kept in service until the endpoints have left it, in-flight requests drained.
func restartsUnderLoad() e2etypes.Feature {
	var ns string
	return features.New(fmt.Sprintf("%d rollout restarts at the chart's replica count under %d admissions per second fail no admission", rolloutRestarts, loadRate)).
		WithLabel(suite.LabelScenario, "W9").
		Setup(suite.NamespaceSetup(&ns, "w9")).
		Assess(fmt.Sprintf("%d × kubectl rollout restart of the webhook Deployment under %d judged admissions per second", rolloutRestarts, loadRate), func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			deployments := c.Kube().AppsV1().Deployments(it.Namespace)
			d, err := deployments.Get(ctx, it.Served.Deployment, metav1.GetOptions{})
			expect.NoError(t, err, "getting Deployment %s/%s", it.Namespace, it.Served.Deployment)
			if d.Spec.Replicas == nil || *d.Spec.Replicas != it.Served.Replicas {
				expect.Fatalf(t, "Deployment %s/%s: expected the chart's %d replicas, saw spec.replicas %v", it.Namespace, d.Name, it.Served.Replicas, d.Spec.Replicas)
			}
			suite.Note(ctx, t, "replicas", it.Served.Replicas)
			var took []float64
			l := startProbeLoad(ctx, t, c, it, ns)
			defer func() {
				finishLoad(ctx, t, l, fmt.Sprintf("through %d rollout restarts of %d replicas", len(took), it.Served.Replicas))
				suite.Note(ctx, t, "restarts", len(took))
				suite.Note(ctx, t, "rolloutSeconds", took)
			}()
			for i := range rolloutRestarts {
				start := time.Now()
				expect.NoError(t, release.RolloutRestart(ctx, c.Kube(), it.Namespace, it.Served.Deployment), "rollout restart %d/%d", i+1, rolloutRestarts)
				expect.NoError(t, release.WaitDeploymentAvailable(ctx, c.Kube(), it.Namespace, it.Served.Deployment, rolloutTimeout), "rollout restart %d/%d of %d replicas", i+1, rolloutRestarts, it.Served.Replicas)
				// The old pods stop under the load too: a pod that stops serving before the
				// endpoints have left it fails admissions only then.
				expect.NoError(t, release.WaitTerminatingGone(ctx, c.Kube(), it.Namespace, metav1.FormatLabelSelector(d.Spec.Selector), "Deployment "+it.Namespace+"/"+d.Name, rolloutTimeout),
					"rollout restart %d/%d of %d replicas", i+1, rolloutRestarts, it.Served.Replicas)
				took = append(took, math.Round(time.Since(start).Seconds()*1000)/1000)
				t.Logf("rollout restart %d/%d of %d replicas done in %.1fs; load so far: %s", i+1, rolloutRestarts, it.Served.Replicas, time.Since(start).Seconds(), l)
			}
			return ctx
		}).
		Feature()
}
