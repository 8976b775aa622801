package leases

import (
	"context"
	"fmt"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// leaseVerbs are every verb on leases.
var leaseVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// serviceAccount is the user the API server authorizes an operator's requests as.
func serviceAccount(ctx context.Context, t *testing.T, c *suite.Cluster, op operator) (user string, groups []string) {
	t.Helper()
	d, err := c.Kube().AppsV1().Deployments(op.rel.Namespace).Get(ctx, op.rel.DeploymentName(), metav1.GetOptions{})
	expect.NoError(t, err, "getting Deployment %s/%s of %s", op.rel.Namespace, op.rel.DeploymentName(), op)
	sa := d.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	ns := op.rel.Namespace
	return fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa), []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
}

// allowed asks the API server (SubjectAccessReview) whether user may verb leases in ns ("" is
// cluster-wide: every namespace).
func allowed(ctx context.Context, t *testing.T, c *suite.Cluster, user string, groups []string, verb, ns string) (bool, string) {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: verb, Namespace: ns},
	}}
	got, err := c.Kube().AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	expect.NoError(t, err, "creating a SubjectAccessReview for %s to %s leases in %q", user, verb, ns)
	return got.Status.Allowed, got.Status.Reason
}

func scope(ns string) string {
	if ns == "" {
		return "cluster-wide (all namespaces)"
	}
	return "in namespace " + ns
}

// leasePermissions is M8: B needs no cluster-scoped lease permission, A can watch Leases
// everywhere — as the API server's SubjectAccessReview says.
func (s *scenarios) leasePermissions() types.Feature {
	return features.New("the restricted operator has no cluster-scoped lease permissions; the cluster-wide one can watch leases everywhere").
		WithLabel(suite.LabelScenario, "M8").
		Assess("B's ServiceAccount: leases only in its namespace", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			b := s.opB()
			user, groups := serviceAccount(ctx, t, c, b.operator)
			for _, ns := range append([]string{""}, s.topo.Tenants...) {
				for _, verb := range leaseVerbs {
					if ok, reason := allowed(ctx, t, c, user, groups, verb, ns); ok {
						expect.Errorf(t, "expected %s (%s) not to be allowed to %s leases %s; SubjectAccessReview allowed it (%s)", user, b, verb, scope(ns), reason)
					}
				}
			}
			// What it does need, so the denials above are not a broken review.
			own := b.rel.RestrictedNamespace()
			for _, verb := range []string{"get", "create", "update", "delete"} {
				if ok, reason := allowed(ctx, t, c, user, groups, verb, own); !ok {
					expect.Errorf(t, "expected %s (%s) to be allowed to %s leases %s to hold its Lease; SubjectAccessReview denied it (%s)", user, b, verb, scope(own), reason)
				}
			}
			return ctx
		}).
		Assess("A's ServiceAccount: list and watch leases in all namespaces", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			a := s.opA()
			user, groups := serviceAccount(ctx, t, c, a)
			for _, verb := range []string{"list", "watch"} {
				if ok, reason := allowed(ctx, t, c, user, groups, verb, ""); !ok {
					expect.Errorf(t, "expected %s (%s) to be allowed to %s leases cluster-wide; SubjectAccessReview denied it (%s)", user, a, verb, reason)
				}
			}
			return ctx
		}).
		Feature()
}
