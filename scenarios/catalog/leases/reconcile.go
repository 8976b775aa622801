package leases

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// What the operators' reconcilers write on a DynamoGraphDeployment (internal/controller).
const (
	graphFinalizer  = "nvidia.com/dynamo-graph-deployment"
	graphSuccessful = "successful"
	// reconcileTimeout bounds how long a stored graph waits for its operator's reconciler.
	reconcileTimeout = time.Minute
)

// reconciled is M10: each operator reconciles the graphs of the namespaces it serves — B those
// of its restricted namespace, which its cache lists and watches alone (its RBAC is a Role
// there), A those elsewhere. A graph stored in either gets the finalizer and its status, and
// its deletion is not held up by the finalizer.
func (s *scenarios) reconciled() types.Feature {
	return features.New("each operator reconciles the graphs of its namespaces: a DynamoGraphDeployment stored in team-a gets B's finalizer and status, one in team-b A's; both are deleted").
		WithLabel(suite.LabelScenario, "M10").
		Setup(s.settledStep).
		Assess("a graph in team-a (B's) and one in team-b (A's) are reconciled, then deleted", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			for _, tc := range []struct {
				ns string
				by operator
			}{{s.opB().rel.RestrictedNamespace(), s.opB().operator}, {s.topo.Tenants[0], s.opA()}} {
				expectReconciled(ctx, t, c, tc.ns, "m10-"+rand.String(5), tc.by)
			}
			return ctx
		}).
		Feature()
}

// expectReconciled stores a valid graph ns/name, waits for by's reconciler to add the finalizer
// and report status.state successful for its generation, deletes it and waits until it is gone.
func expectReconciled(ctx context.Context, t *testing.T, c *suite.Cluster, ns, name string, by operator) {
	t.Helper()
	graphs := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns)
	_, err := graphs.Create(ctx, dynamo.GraphDeployment(ns, name), metav1.CreateOptions{})
	expect.NoError(t, err, "creating DynamoGraphDeployment %s/%s", ns, name)
	what := fmt.Sprintf("DynamoGraphDeployment %s/%s to get finalizer %s and status.state %q from %s's reconciler", ns, name, graphFinalizer, graphSuccessful, by)
	expect.Eventually(ctx, t, what, reconcileTimeout, func(ctx context.Context) (bool, string, error) {
		g, err := graphs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		state, _, _ := unstructured.NestedString(g.Object, "status", "state")
		observed, _, _ := unstructured.NestedInt64(g.Object, "status", "observedGeneration")
		seen := fmt.Sprintf("finalizers %v, status.state %q, observedGeneration %d of generation %d", g.GetFinalizers(), state, observed, g.GetGeneration())
		return slices.Contains(g.GetFinalizers(), graphFinalizer) && state == graphSuccessful && observed == g.GetGeneration(), seen, nil
	})
	expect.NoError(t, graphs.Delete(ctx, name, metav1.DeleteOptions{}), "deleting DynamoGraphDeployment %s/%s", ns, name)
	expect.Eventually(ctx, t, fmt.Sprintf("DynamoGraphDeployment %s/%s to be gone (%s's reconciler removes its finalizer)", ns, name, by), reconcileTimeout,
		func(ctx context.Context) (bool, string, error) {
			g, err := graphs.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			if err != nil {
				return false, "", err
			}
			return false, fmt.Sprintf("still there, finalizers %v", g.GetFinalizers()), nil
		})
}
