package troubleshooting

import (
	"context"
	"fmt"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// operatorFinalizer is the finalizer the operator puts on every DynamoGraphDeployment and takes
// off when the graph is deleted (v1alpha1.DynamoGraphDeploymentFinalizer).
const operatorFinalizer = "nvidia.com/dynamo-graph-deployment"

// userFinalizer is a finalizer of some other controller, which the scenario removes by hand.
const userFinalizer = "gauntlet.dev/t12"

// removeFinalizers is `kubectl patch --type=merge -p '{"metadata":{"finalizers":null}}'`.
func removeFinalizers(ctx context.Context, c *suite.Cluster, ns, name string) error {
	_, err := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Patch(ctx, name, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	return err
}

// getGraph reads ns/name; found is false once it is gone.
func getGraph(ctx context.Context, c *suite.Cluster, ns, name string) (obj *unstructured.Unstructured, found bool, err error) {
	obj, err = c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	return obj, err == nil, err
}

// describeGraph says whether a graph is terminating and which finalizers hold it.
func describeGraph(obj *unstructured.Unstructured) string {
	state := "live"
	if obj.GetDeletionTimestamp() != nil {
		state = "Terminating"
	}
	return fmt.Sprintf("%s %s, finalizers %v", graphRef(obj), state, obj.GetFinalizers())
}

// waitGraph waits until the graph's state satisfies cond (obj is nil once it is gone).
func waitGraph(ctx context.Context, t *testing.T, c *suite.Cluster, ns, name, what string, cond func(obj *unstructured.Unstructured) bool) {
	t.Helper()
	expect.Eventually(ctx, t, fmt.Sprintf("DynamoGraphDeployment %s/%s %s", ns, name, what), propagationTimeout,
		func(ctx context.Context) (bool, string, error) {
			obj, found, err := getGraph(ctx, c, ns, name)
			switch {
			case err != nil:
				return false, err.Error(), nil
			case !found:
				return cond(nil), "gone", nil
			}
			return cond(obj), describeGraph(obj), nil
		})
}

// createHeldGraph creates a valid graph and waits until the operator has put its finalizer on it.
func createHeldGraph(ctx context.Context, t *testing.T, c *suite.Cluster, ns, name string, finalizers ...string) {
	t.Helper()
	obj := dynamo.GraphDeployment(ns, name)
	obj.SetFinalizers(finalizers)
	_, err := createGraph(ctx, c, obj)
	expect.NoError(t, err, "creating %s", graphRef(obj))
	waitGraph(ctx, t, c, ns, name, "to carry the operator's finalizer "+operatorFinalizer, func(obj *unstructured.Unstructured) bool {
		return obj != nil && slices.Contains(obj.GetFinalizers(), operatorFinalizer)
	})
}

// setFailurePolicy sets policy on every webhook of the release's two configurations, as
// `kubectl patch validatingwebhookconfiguration … --type=json` does.
func setFailurePolicy(ctx context.Context, c *suite.Cluster, r *chart.Release, policy admissionregistrationv1.FailurePolicyType) error {
	api := c.Kube().AdmissionregistrationV1()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		vwc, err := api.ValidatingWebhookConfigurations().Get(ctx, r.ValidatingName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range vwc.Webhooks {
			vwc.Webhooks[i].FailurePolicy = &policy
		}
		_, err = api.ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting failurePolicy %s on ValidatingWebhookConfiguration %s: %w", policy, r.ValidatingName(), err)
	}
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		mwc, err := api.MutatingWebhookConfigurations().Get(ctx, r.MutatingName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range mwc.Webhooks {
			mwc.Webhooks[i].FailurePolicy = &policy
		}
		_, err = api.MutatingWebhookConfigurations().Update(ctx, mwc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting failurePolicy %s on MutatingWebhookConfiguration %s: %w", policy, r.MutatingName(), err)
	}
	return nil
}

// failurePolicies lists "<webhook>=<policy>" for every webhook of the release whose policy is
// not want.
func failurePoliciesOtherThan(ctx context.Context, c *suite.Cluster, r *chart.Release, want admissionregistrationv1.FailurePolicyType) ([]string, error) {
	api := c.Kube().AdmissionregistrationV1()
	vwc, err := api.ValidatingWebhookConfigurations().Get(ctx, r.ValidatingName(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting ValidatingWebhookConfiguration %s: %w", r.ValidatingName(), err)
	}
	mwc, err := api.MutatingWebhookConfigurations().Get(ctx, r.MutatingName(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting MutatingWebhookConfiguration %s: %w", r.MutatingName(), err)
	}
	var out []string
	check := func(name string, p *admissionregistrationv1.FailurePolicyType) {
		if p == nil || *p != want {
			got := "unset"
			if p != nil {
				got = string(*p)
			}
			out = append(out, name+"="+got)
		}
	}
	for _, w := range vwc.Webhooks {
		check(w.Name, w.FailurePolicy)
	}
	for _, w := range mwc.Webhooks {
		check(w.Name, w.FailurePolicy)
	}
	return out, nil
}

// stuckTerminating is T12: the webhook never blocks finalizer removal — but a webhook that
// cannot be called does, when its failurePolicy is Fail. The documented workaround for a
// resource stuck Terminating: set failurePolicy Ignore, remove the finalizer so the deletion
// completes, then `helm upgrade` to restore the webhook configurations.
func stuckTerminating() e2etypes.Feature {
	var ns string
	var want int32
	const released, stuck = "released", "stuck"
	return features.New("resource stuck Terminating: finalizer removal never blocked by the webhook; the documented workaround works").
		WithLabel(suite.LabelScenario, "T12").
		Setup(baseline("t12", &ns)).
		Assess("finalizer removal is never blocked: a Terminating graph's finalizers come off through the webhooks", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			createHeldGraph(ctx, t, c, ns, released, userFinalizer)
			err := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Delete(ctx, released, metav1.DeleteOptions{})
			expect.NoError(t, err, "deleting DynamoGraphDeployment %s/%s", ns, released)
			// The operator removes its own finalizer: an update of a graph being deleted.
			waitGraph(ctx, t, c, ns, released, "Terminating with only "+userFinalizer+" left (the operator removed its own)", func(obj *unstructured.Unstructured) bool {
				return obj != nil && obj.GetDeletionTimestamp() != nil && slices.Equal(obj.GetFinalizers(), []string{userFinalizer})
			})
			expect.NoError(t, removeFinalizers(ctx, c, ns, released), "removing the finalizers of DynamoGraphDeployment %s/%s", ns, released)
			waitGraph(ctx, t, c, ns, released, "gone", func(obj *unstructured.Unstructured) bool { return obj == nil })
			logs, err := operatorLogs(ctx, c, r)
			expect.NoError(t, err, "reading the operator's logs")
			var results []string
			for _, e := range logs.find(admissionLine("validate update", ns, released)) {
				results = append(results, e.Result)
			}
			if len(results) == 0 || slices.ContainsFunc(results, func(s string) bool { return s != "allowed" }) {
				expect.Errorf(t, "operator logs: expected \"validate update\" lines for %s/%s, all allowed (the webhook judged the finalizer removals), saw results %v", ns, released, results)
			}
			return ctx
		})).
		Assess("fault: the operator down (failurePolicy Fail) and a graph deleted: it stays Terminating", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			createHeldGraph(ctx, t, c, ns, stuck)
			scaleDown(ctx, t, c, r, &want)
			err := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Delete(ctx, stuck, metav1.DeleteOptions{})
			expect.NoError(t, err, "deleting DynamoGraphDeployment %s/%s", ns, stuck)
			waitGraph(ctx, t, c, ns, stuck, "Terminating, held by "+operatorFinalizer, func(obj *unstructured.Unstructured) bool {
				return obj != nil && obj.GetDeletionTimestamp() != nil && slices.Contains(obj.GetFinalizers(), operatorFinalizer)
			})
			return ctx
		})).
		Assess("symptom: removing the finalizer by hand fails: failed calling webhook … connect: connection refused", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			expectEventuallyFailsWith(ctx, t, fmt.Sprintf("removing the finalizers of DynamoGraphDeployment %s/%s", ns, stuck), propagationTimeout,
				func(ctx context.Context) error { return removeFinalizers(ctx, c, ns, stuck) }, failedCallPrefix, dialTCP, connectionRefused)
			obj, found, err := getGraph(ctx, c, ns, stuck)
			expect.NoError(t, err, "getting DynamoGraphDeployment %s/%s", ns, stuck)
			if !found || obj.GetDeletionTimestamp() == nil {
				expect.Errorf(t, "DynamoGraphDeployment %s/%s: expected it still Terminating, saw found=%t", ns, stuck, found)
			}
			return ctx
		}).
		Assess("the doctor names the operator being down (T6, service-endpoints) as the one root cause", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectDoctorNames(ctx, t, c, targetOf(r, ns), "T6", "service-endpoints")
			return ctx
		})).
		Assess("documented workaround: failurePolicy Ignore, remove the finalizer, helm upgrade", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expect.NoError(t, setFailurePolicy(ctx, c, r, admissionregistrationv1.Ignore), "patching failurePolicy Ignore")
			// The API server applies the new policy once its informer has it.
			expect.Eventually(ctx, t, fmt.Sprintf("removing the finalizers of DynamoGraphDeployment %s/%s to succeed", ns, stuck), propagationTimeout,
				func(ctx context.Context) (bool, string, error) {
					err := removeFinalizers(ctx, c, ns, stuck)
					return err == nil || apierrors.IsNotFound(err), errOrAdmitted(err), nil
				})
			waitGraph(ctx, t, c, ns, stuck, "gone", func(obj *unstructured.Unstructured) bool { return obj == nil })
			expect.NoError(t, helmUpgrade(ctx, c, r), "helm upgrade of %s", r)
			other, err := failurePoliciesOtherThan(ctx, c, r, admissionregistrationv1.Fail)
			expect.NoError(t, err, "reading the failurePolicies")
			if len(other) > 0 {
				expect.Errorf(t, "after helm upgrade: expected failurePolicy Fail on every webhook, saw %v", other)
			}
			n, err := replicas(ctx, c, r)
			expect.NoError(t, err, "reading the operator's replicas")
			t.Logf("after helm upgrade the operator has %d replicas (the chart's value; it was scaled to 0)", n)
			scaleBack(ctx, t, c, r, want)
			expectEventuallyDenied(ctx, t, c, ns, "invalid", admissionTimeout)
			return ctx
		})).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			if other, err := failurePoliciesOtherThan(ctx, c, r, admissionregistrationv1.Fail); err != nil || len(other) > 0 {
				if err := helmUpgrade(ctx, c, r); err != nil {
					expect.Errorf(t, "restoring failurePolicy Fail: %v", err)
				}
			}
			scaleBack(ctx, t, c, r, want)
			// Whatever is left must not hold the namespace's deletion.
			for _, name := range []string{released, stuck} {
				if err := ignoreNotFound(removeFinalizers(ctx, c, ns, name)); err != nil {
					expect.Errorf(t, "removing the finalizers of DynamoGraphDeployment %s/%s: %v", ns, name, err)
				}
			}
			return ctx
		})).
		Teardown(restored(&ns)).
		Feature()
}
