package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// Timeouts of taking the operator down and bringing it back.
const (
	scaleDownTimeout = 2 * time.Minute
	restoreTimeout   = 3 * time.Minute
)

// celWithoutWebhook is A11: the CRDs' own CEL rules reject the immutable-field changes even
// when no webhook answers — the release upgraded to failurePolicy Ignore with the operator
// scaled to zero, the state a cluster is in when the operator is down and admission was made
// lenient. The release is restored afterwards, so later scenarios find a working operator.
func celWithoutWebhook() e2etypes.Feature {
	var ns string
	var policies map[string]admissionregistrationv1.FailurePolicyType
	var restore map[string]any // chart values that undo the bypass; nil until it is known
	bypassed := false
	requireBypassed := func(t *testing.T) {
		t.Helper()
		if !bypassed {
			expect.Fatalf(t, "the webhooks were not bypassed (see the first step), so an answer here could be the webhook's rather than CEL's")
		}
	}
	return features.New("CEL rules reject immutable-field changes with the webhooks bypassed (failurePolicy Ignore, operator down)").
		WithLabel(suite.LabelScenario, "A11").
		Setup(suite.NamespaceSetup(&ns, "a11")).
		Assess("helm upgrade with webhook.failurePolicy=Ignore and replicas=0: no operator pod, and an invalid graph is admitted unmutated", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			var err error
			policies, err = failurePolicies(ctx, c, r)
			expect.NoError(t, err, "reading the webhooks' failurePolicy before the upgrade")
			deploy, err := c.Kube().AppsV1().Deployments(r.Namespace).Get(ctx, r.DeploymentName(), metav1.GetOptions{})
			expect.NoError(t, err, "getting Deployment %s/%s", r.Namespace, r.DeploymentName())
			restore = restoreValues(r, policies, ptrValue(deploy.Spec.Replicas))

			bypass := *r
			bypass.Values = chart.MergeValues(r.Values, map[string]any{"webhook": map[string]any{"failurePolicy": "Ignore"}, "replicas": int64(0)})
			expect.NoError(t, c.Installer().Upgrade(ctx, &bypass), "upgrading %s to failurePolicy Ignore and 0 replicas", r)
			expect.NoError(t, release.WaitPodsGone(ctx, c.Kube(), r.Namespace, "app.kubernetes.io/instance="+r.Name, scaleDownTimeout), "waiting for the operator pods to go")

			now, err := failurePolicies(ctx, c, r)
			expect.NoError(t, err, "reading the webhooks' failurePolicy after the upgrade")
			for webhook, policy := range now {
				if policy != admissionregistrationv1.Ignore {
					expect.Errorf(t, "%s after the upgrade: expected failurePolicy Ignore, saw %s", webhook, policy)
				}
			}

			// With every webhook skipped, nothing denies or stamps a graph without services.
			probe := dynamo.InvalidGraphDeployment(ns, "probe")
			got, err := c.Dynamic().Resource(graphDeployments.gvr).Namespace(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				expect.Fatalf(t, "dry-run creating DynamoGraphDeployment %s without services with the webhooks bypassed: expected it admitted, saw %q", ref(ns, "probe"), err.Error())
			}
			if v, ok := got.GetAnnotations()[dynamo.OriginVersionAnnotation]; ok {
				expect.Fatalf(t, "dry-run DynamoGraphDeployment %s with the webhooks bypassed: expected no %s annotation (mutating webhook skipped), saw %q", ref(ns, "probe"), dynamo.OriginVersionAnnotation, v)
			}
			bypassed = !t.Failed()
			return ctx
		})).
		Assess("every CEL rule on both sides, as with the webhooks: backendFramework, modelType and baseModelName cannot change but can be sent unchanged; a request's spec cannot change while Profiling, Deploying or Deployed, and can while Pending", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			requireBypassed(t)
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			for _, b := range celBoundaries() {
				expectBoundary(ctx, t, dyn, ns, b)
			}
			return ctx
		}).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			if restore == nil {
				return ctx // nothing was changed
			}
			restored := *r
			restored.Values = restore
			if err := c.Installer().Upgrade(ctx, &restored); err != nil {
				expect.Errorf(t, "restoring %s after A11: %v", r, err)
				return ctx
			}
			if err := c.Installer().WaitReady(ctx, &restored, restoreTimeout); err != nil {
				expect.Errorf(t, "restoring %s after A11: %v", r, err)
				return ctx
			}
			now, err := failurePolicies(ctx, c, r)
			if err != nil {
				expect.Errorf(t, "reading the webhooks' failurePolicy after restoring %s: %v", r, err)
				return ctx
			}
			for webhook, policy := range now {
				if want, ok := policies[webhook]; ok && policy != want {
					expect.Errorf(t, "%s after restoring %s: expected failurePolicy %s, saw %s", webhook, r, want, policy)
				}
			}
			return ctx
		})).
		Feature()
}

// failurePolicies reads the failurePolicy of every webhook of the release, by
// webhookKey.
func failurePolicies(ctx context.Context, c *suite.Cluster, r *chart.Release) (map[string]admissionregistrationv1.FailurePolicyType, error) {
	out := map[string]admissionregistrationv1.FailurePolicyType{}
	vwc, err := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, r.ValidatingName(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting ValidatingWebhookConfiguration %s: %w", r.ValidatingName(), err)
	}
	for _, w := range vwc.Webhooks {
		out[webhookKey("ValidatingWebhookConfiguration", vwc.Name, w.Name)] = ptrValue(w.FailurePolicy)
	}
	mwc, err := c.Kube().AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, r.MutatingName(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting MutatingWebhookConfiguration %s: %w", r.MutatingName(), err)
	}
	for _, w := range mwc.Webhooks {
		out[webhookKey("MutatingWebhookConfiguration", mwc.Name, w.Name)] = ptrValue(w.FailurePolicy)
	}
	return out, nil
}

func webhookKey(kind, configuration, webhook string) string {
	return kind + " " + configuration + "/" + webhook
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// restoreValues are the release's values with the failurePolicy and replica count it had
// before the bypass spelled out: a helm upgrade given no values at all would keep the
// bypass's values instead (Helm reuses the previous release's values then).
func restoreValues(r *chart.Release, policies map[string]admissionregistrationv1.FailurePolicyType, replicas int32) map[string]any {
	before := map[string]any{"replicas": int64(replicas)}
	// The chart sets one failurePolicy for every webhook.
	if p, ok := policies[webhookKey("ValidatingWebhookConfiguration", r.ValidatingName(), graphDeployments.validating)]; ok {
		before["webhook"] = map[string]any{"failurePolicy": string(p)}
	}
	return chart.MergeValues(before, r.Values)
}
