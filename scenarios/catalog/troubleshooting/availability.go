package troubleshooting

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// The webhook unreachable or too slow: T6 (operator down, failurePolicy Fail), T7 (the same with
// failurePolicy Ignore), T8 (Service deleted), T9 (slower than timeoutSeconds).

// Stable parts of the API server's errors for a webhook that cannot be called.
var (
	connectionRefused = quoted(": connect: connection refused")
	dialTCP           = quoted("dial tcp ")
	deadlineExceeded  = quoted("context deadline exceeded")
)

// scaleDown records the operator's replicas in *want and scales it to zero.
func scaleDown(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, want *int32) {
	t.Helper()
	n, err := replicas(ctx, c, r)
	expect.NoError(t, err, "reading the operator's replicas")
	*want = n
	expect.NoError(t, scaleOperator(ctx, c, r, 0), "scaling %s to 0", r)
}

// scaledBack is T6's and T7's fix: the operator scaled back to the replicas scaleDown recorded;
// invalid objects in namespace *ns are denied again.
func scaledBack(ns *string, want *int32) features.Func {
	return suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
		expect.NoError(t, scaleOperator(ctx, c, r, *want), "scaling %s back to %d", r, *want)
		expectEventuallyDenied(ctx, t, c, *ns, "invalid", admissionTimeout)
		return ctx
	})
}

// scaleBack restores the replicas scaleDown recorded (at least one) if the operator has none.
func scaleBack(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, want int32) {
	t.Helper()
	n, err := replicas(ctx, c, r)
	if err != nil {
		expect.Errorf(t, "restoring the operator: %v", err)
		return
	}
	if n > 0 {
		return
	}
	if err := scaleOperator(ctx, c, r, max(want, 1)); err != nil {
		expect.Errorf(t, "restoring the operator: %v", err)
	}
}

// operatorDownFail is T6: the operator scaled to zero (or crashed) with failurePolicy Fail:
// every create is rejected because the webhook cannot be reached.
func operatorDownFail() e2etypes.Feature {
	var ns string
	var want int32
	return features.New("operator down with failurePolicy Fail: connection refused until the operator is back").
		WithLabel(suite.LabelScenario, "T6").
		Setup(baseline("t6", &ns)).
		Assess("fault: kubectl scale deployment <release>-operator --replicas=0", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			scaleDown(ctx, t, c, r, &want)
			return ctx
		})).
		Assess("symptom: failed calling webhook … dial tcp …: connect: connection refused", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			expectCreateFailsWith(ctx, t, suite.ClusterFrom(ctx, t), ns, failedCallPrefix, dialTCP, connectionRefused)
			return ctx
		}).
		Assess(doctorNames(&ns, "T6", "service-endpoints")).
		Assess("fix: kubectl scale --replicas back; admission works again", scaledBack(&ns, &want)).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			scaleBack(ctx, t, c, r, want)
			return ctx
		})).
		Teardown(restored(&ns)).
		Feature()
}

// operatorDownIgnore is T7: as T6, but failurePolicy Ignore: the API server admits everything
// unvalidated while the operator is down.
func operatorDownIgnore() e2etypes.Feature {
	var ns string
	var want int32
	ignore := map[string]any{"webhook": map[string]any{"failurePolicy": "Ignore"}}
	return features.New("operator down with failurePolicy Ignore: invalid objects admitted without validation").
		WithLabel(suite.LabelScenario, "T7").
		Setup(baseline("t7", &ns)).
		Assess("fault: helm upgrade --set webhook.failurePolicy=Ignore, then kubectl scale --replicas=0", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expect.NoError(t, helmUpgrade(ctx, c, withValues(r, ignore)), "helm upgrade of %s with failurePolicy Ignore", r)
			scaleDown(ctx, t, c, r, &want)
			return ctx
		})).
		Assess("symptom: an invalid DynamoGraphDeployment is admitted, neither validated nor mutated", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			expectAdmittedUnvalidated(ctx, t, suite.ClusterFrom(ctx, t), ns, false)
			return ctx
		}).
		Assess(doctorNames(&ns, "T7", "service-endpoints")).
		Assess("restore the operator: invalid objects are denied again", scaledBack(&ns, &want)).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			// The suite's values again: failurePolicy Fail, and the chart's replicas.
			if err := helmUpgrade(ctx, c, r); err != nil {
				expect.Errorf(t, "restoring failurePolicy Fail on %s: %v", r, err)
			}
			scaleBack(ctx, t, c, r, want)
			return ctx
		})).
		Teardown(restored(&ns)).
		Feature()
}

// deletedService is T8: the webhook Service deleted; the API server cannot resolve it.
func deletedService() e2etypes.Feature {
	var ns string
	return features.New("webhook Service deleted: service not found until helm upgrade restores it").
		WithLabel(suite.LabelScenario, "T8").
		Setup(baseline("t8", &ns)).
		Assess("fault: kubectl delete service <release>-webhook-service", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			err := c.Kube().CoreV1().Services(r.Namespace).Delete(ctx, r.ServiceName(), metav1.DeleteOptions{})
			expect.NoError(t, err, "deleting Service %s/%s", r.Namespace, r.ServiceName())
			return ctx
		})).
		Assess(`symptom: failed calling webhook … service "<name>" not found`, suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			// The API server resolves the Service from its informer, which learns of the
			// deletion within moments; when it resolves depends on its version.
			notFound := quoted(fmt.Sprintf("service %q not found", r.ServiceName()))
			if !suite.ResolvesWebhookServicePerRequest(c.KubernetesVersion()) {
				// Before v1.37 the API server resolves the Service only when it dials: the
				// connections it has open to the Service's address keep carrying calls, admitted,
				// while they live (the operator's own conversion traffic keeps them from idling
				// out). That is what a user sees there; the symptom shows once the API server
				// dials again — after the operator's pods restart and close their connections.
				suite.Note(ctx, t, "admittedRightAfterDeletion", dryRunCreateProbe(ctx, c, ns) == nil)
				expect.NoError(t, release.RolloutRestart(ctx, c.Kube(), r.Namespace, r.DeploymentName()), "rollout restart of %s (Kubernetes %s keeps calling a deleted Service over open connections)", r, c.KubernetesVersion())
				expect.NoError(t, release.WaitDeploymentAvailable(ctx, c.Kube(), r.Namespace, r.DeploymentName(), rolloutTimeout), "waiting for the rollout")
				expect.NoError(t, release.WaitOldPodsGone(ctx, c.Kube(), r, rolloutTimeout), "waiting for the replaced pods to be gone")
			}
			expectCreateFailsWith(ctx, t, c, ns, failedCallPrefix, notFound)
			return ctx
		})).
		Assess(doctorNames(&ns, "T8", "webhook-service")).
		Assess("fix: helm upgrade restores the Service; admission works again", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expect.NoError(t, helmUpgrade(ctx, c, r), "helm upgrade of %s", r)
			_, err := c.Kube().CoreV1().Services(r.Namespace).Get(ctx, r.ServiceName(), metav1.GetOptions{})
			expect.NoError(t, err, "getting Service %s/%s after helm upgrade", r.Namespace, r.ServiceName())
			expectEventuallyDenied(ctx, t, c, ns, "invalid", admissionTimeout)
			return ctx
		})).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			_, err := c.Kube().CoreV1().Services(r.Namespace).Get(ctx, r.ServiceName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				if err := helmUpgrade(ctx, c, r); err != nil {
					expect.Errorf(t, "restoring Service %s/%s: %v", r.Namespace, r.ServiceName(), err)
				}
			}
			return ctx
		})).
		Teardown(restored(&ns)).
		Feature()
}

// T9's settings: a webhook that takes longer than the API server waits for it. The margin is
// wide on purpose (a loaded machine must neither finish a call in 2s with a 5s delay nor fail
// one in 10s without it).
const (
	slowTimeoutSeconds = 2
	slowLatency        = "5s"
)

// slowWebhook is T9: a webhook slower than its timeoutSeconds, made with the operator's
// test-only latency injection (webhook.latencyInjection, off by default).
func slowWebhook() e2etypes.Feature {
	var ns string
	slow := map[string]any{"webhook": map[string]any{"timeoutSeconds": slowTimeoutSeconds, "latencyInjection": slowLatency}}
	return features.New("webhook slower than timeoutSeconds: context deadline exceeded").
		WithLabel(suite.LabelScenario, "T9").
		Setup(baseline("t9", &ns)).
		Assess(fmt.Sprintf("fault: helm upgrade --set webhook.timeoutSeconds=%d --set webhook.latencyInjection=%s (test only)", slowTimeoutSeconds, slowLatency),
			suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
				expect.NoError(t, helmUpgrade(ctx, c, withValues(r, slow)), "helm upgrade of %s with a slow webhook", r)
				return ctx
			})).
		Assess("symptom: failed calling webhook … context deadline exceeded", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			expectCreateFailsWith(ctx, t, suite.ClusterFrom(ctx, t), ns, failedCallPrefix, deadlineExceeded)
			return ctx
		}).
		Assess(doctorNames(&ns, "T9", "admission-dry-run")).
		Assess("restore: helm upgrade without the latency; admission works again", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expect.NoError(t, helmUpgrade(ctx, c, r), "helm upgrade of %s without the latency", r)
			expectEventuallyDenied(ctx, t, c, ns, "invalid", admissionTimeout)
			return ctx
		})).
		Teardown(upgradeBack("restoring")).
		Teardown(restored(&ns)).
		Feature()
}
