package admission

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// Finalizers on the A10 graph: the operator's own, and one a user's tooling holds.
const (
	operatorFinalizer = "nvidia.com/dynamo-graph-deployment"
	holdFinalizer     = "e2e.gauntlet.dev/hold"
)

// namespaceLockLease is the Lease a namespace-restricted operator holds in its namespace; while
// it is active the cluster-wide operator neither validates nor mutates there.
const namespaceLockLease = "dynamo-operator-ns-lock"

// exclusionTimeout is how long the cluster-wide operator may take to notice a lock Lease
// appear or go.
const exclusionTimeout = 30 * time.Second

// finalizerRemoval is A10: a DynamoGraphDeployment that today's rules deny (no services —
// admitted while a namespace-restricted operator owned its namespace, whose rules it then
// answered to) can still be deleted: once it is being deleted, the webhook lets the operator
// and the user remove their finalizers.
func finalizerRemoval() e2etypes.Feature {
	var ns string
	const name = "legacy"
	return features.New("an object today's rules deny can still lose its finalizers once it is being deleted").
		WithLabel(suite.LabelScenario, "A10").
		Setup(suite.NamespaceSetup(&ns, "a10")).
		Assess("a graph without services was admitted while another operator owned the namespace", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			lease := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: namespaceLockLease, Namespace: ns},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To("gauntlet-a10-restricted-operator"),
					LeaseDurationSeconds: ptr.To[int32](600),
					RenewTime:            ptr.To(metav1.NewMicroTime(time.Now())),
				},
			}
			_, err := c.Kube().CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{})
			expect.NoError(t, err, "creating Lease %s", ref(ns, namespaceLockLease))
			waitValidation(ctx, t, c, ns, false)

			legacy := graphDeployments.object(ns, name, map[string]any{"backendFramework": "vllm"})
			legacy.SetFinalizers([]string{operatorFinalizer, holdFinalizer})
			graphDeployments.mustCreate(ctx, t, c.Dynamic(), legacy)

			err = c.Kube().CoordinationV1().Leases(ns).Delete(ctx, namespaceLockLease, metav1.DeleteOptions{})
			expect.NoError(t, err, "deleting Lease %s", ref(ns, namespaceLockLease))
			waitValidation(ctx, t, c, ns, true)
			return ctx
		}).
		Assess("today's rules deny any update of it", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			_, err := graphDeployments.tryPatch(ctx, dyn, ns, name, map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "a"}}})
			expectDenied(t, "labelling DynamoGraphDeployment "+ref(ns, name), err,
				graphDeployments.denial(ns, name, "spec.services: Required value: at least one service is required"))
			return ctx
		}).
		Assess("once it is being deleted the operator removes its finalizer", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			err := dyn.Resource(graphDeployments.gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
			expect.NoError(t, err, "deleting DynamoGraphDeployment %s", ref(ns, name))
			what := fmt.Sprintf("the operator to remove %s from the deleted DynamoGraphDeployment %s (finalizers left: [%s])", operatorFinalizer, ref(ns, name), holdFinalizer)
			expect.Eventually(ctx, t, what, time.Minute, func(ctx context.Context) (bool, string, error) {
				obj, err := dyn.Resource(graphDeployments.gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				return slices.Equal(obj.GetFinalizers(), []string{holdFinalizer}),
					fmt.Sprintf("finalizers %v, deletionTimestamp %v", obj.GetFinalizers(), obj.GetDeletionTimestamp()), nil
			})
			return ctx
		}).
		Assess("the user removes the last finalizer and the object is gone", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			_, err := graphDeployments.tryPatch(ctx, dyn, ns, name, map[string]any{"metadata": map[string]any{"finalizers": nil}})
			if !expectAdmitted(t, "removing finalizer "+holdFinalizer+" from the deleted DynamoGraphDeployment "+ref(ns, name), err) {
				return ctx
			}
			expect.Eventually(ctx, t, "DynamoGraphDeployment "+ref(ns, name)+" to be gone", 30*time.Second, func(ctx context.Context) (bool, string, error) {
				obj, err := dyn.Resource(graphDeployments.gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true, "", nil
				}
				if err != nil {
					return false, err.Error(), nil
				}
				return false, fmt.Sprintf("still there: finalizers %v, deletionTimestamp %v", obj.GetFinalizers(), obj.GetDeletionTimestamp()), nil
			})
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// After a failure, leave nothing that would hold the namespace's deletion: no lock
			// Lease, and the graph deleted before its finalizers go (the order the webhook admits).
			c := suite.ClusterFrom(ctx, t)
			if err := c.Kube().CoordinationV1().Leases(ns).Delete(ctx, namespaceLockLease, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Logf("deleting Lease %s: %v", ref(ns, namespaceLockLease), err)
			}
			dyn := c.Dynamic().Resource(graphDeployments.gvr).Namespace(ns)
			if err := dyn.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Logf("deleting DynamoGraphDeployment %s: %v", ref(ns, name), err)
			}
			if _, err := graphDeployments.tryPatch(ctx, c.Dynamic(), ns, name, map[string]any{"metadata": map[string]any{"finalizers": nil}}); err != nil && !apierrors.IsNotFound(err) {
				t.Logf("removing the finalizers of DynamoGraphDeployment %s: %v", ref(ns, name), err)
			}
			return ctx
		}).
		Feature()
}

// waitValidation waits until the cluster-wide operator validates namespace ns (validating
// true) or skips it: a dry-run DynamoGraphDeployment without services is denied or admitted.
func waitValidation(ctx context.Context, t *testing.T, c *suite.Cluster, ns string, validating bool) {
	t.Helper()
	what := "the operator to skip namespace " + ns + " while Lease " + namespaceLockLease + " is active (a dry-run DynamoGraphDeployment without services admitted)"
	if validating {
		what = "the operator to validate namespace " + ns + " again once Lease " + namespaceLockLease + " is gone (a dry-run DynamoGraphDeployment without services denied)"
	}
	expect.Eventually(ctx, t, what, exclusionTimeout, func(ctx context.Context) (bool, string, error) {
		probe := dynamo.InvalidGraphDeployment(ns, "probe")
		_, err := c.Dynamic().Resource(graphDeployments.gvr).Namespace(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return !validating, "admitted", nil
		}
		return validating && apierrors.IsInvalid(err), err.Error(), nil
	})
}
