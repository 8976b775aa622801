package contract

import (
	"context"
	"fmt"
	"strings"
	"testing"

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
			var unprobed []string
			for _, w := range it.Served.Webhooks {
				p := probeOf(it, w.Name)
				switch {
				case p == nil:
					unprobed = append(unprobed, w.Name)
					continue
				case !w.Mutating && p.Denied == nil:
					expect.Errorf(t, "the probe of validating webhook %s has no denied object: nothing proves it answers", w.Name)
					continue
				case w.Mutating && p.Patch == "":
					expect.Errorf(t, "the probe of mutating webhook %s has no patch: nothing proves it answers", w.Name)
					continue
				}
				expect.Eventually(ctx, t, fmt.Sprintf("webhook %s (%s, failurePolicy %s) to answer its probe", w.Name, kindOf(w.Mutating), w.FailurePolicy), answerTimeout,
					func(ctx context.Context) (bool, string, error) {
						var seen string
						if w.Mutating {
							obj, err := it.Target.Object(p.Admitted)
							if err != nil {
								return false, "", err
							}
							seen = judgePatch(*p, dryRun(ctx, c, obj, ns))
						} else {
							obj, err := it.Target.Object(p.Denied.Object)
							if err != nil {
								return false, "", err
							}
							seen = judgeDenial(*p, dryRun(ctx, c, obj, ns))
						}
						return seen == "", seen, nil
					})
			}
			if len(unprobed) > 0 {
				expect.Errorf(t, "the chart registers webhooks the description has no probe for: %s (add them under probes)", strings.Join(unprobed, ", "))
			}
			return ctx
		}).Feature()
}

func kindOf(mutating bool) string {
	if mutating {
		return "mutating"
	}
	return "validating"
}
