package contract

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// install is W1: the target installs as its chart gives it, its Deployment runs every replica
// the chart asks for, and every webhook the chart registers answers through the API server —
// a validating one by denying its probe, a mutating one by patching its probe. An answer is
// the only proof: under failurePolicy Ignore, a webhook that cannot be reached admits all.
// Then every replica judges, each sent the probes directly: the Service picks any replica, and
// one that has not yet taken in the setup objects (a policy each replica compiles on its own)
// admits what the others deny, so the checks that follow would judge a target still starting.
func install() e2etypes.Feature {
	var ns string
	return features.New("the target installs and every webhook it registers answers through the API server").
		WithLabel(suite.LabelScenario, "W1").
		Setup(suite.NamespaceSetup(&ns, "w1")).
		Assess("the Deployment behind the webhook Service runs every replica the chart asks for", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			d, err := c.Kube().AppsV1().Deployments(it.Namespace).Get(ctx, it.Served.Deployment, metav1.GetOptions{})
			expect.NoError(t, err, "getting Deployment %s/%s, the one behind Service %s", it.Namespace, it.Served.Deployment, it.Served.Service)
			expect.Equal(t, fmt.Sprintf("available replicas of Deployment %s/%s (the chart's %d)", it.Namespace, d.Name, it.Served.Replicas),
				it.Served.Replicas, d.Status.AvailableReplicas)
			return ctx
		}).
		Assess("every webhook judges its probe: validating ones deny, mutating ones patch", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			_, problems := probedWebhooks(it)
			for _, problem := range problems {
				expect.Errorf(t, "%s", problem)
			}
			expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
			return ctx
		}).
		Assess("every Ready replica judges every webhook's probe sent to it directly", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			start := time.Now()
			deadline := start.Add(answerTimeout)
			pods := readyPods(ctx, t, c, it, int(it.Served.Replicas))
			expectEveryPodJudges(ctx, t, c, it, pods, ns, deadline, "")
			suite.Note(ctx, t, "every replica judging", fmt.Sprintf("%d replicas, %s after every webhook answered through the API server", len(pods), time.Since(start).Round(time.Second)))
			return ctx
		}).Feature()
}
