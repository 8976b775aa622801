package troubleshooting

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// serviceAccountUser is the user name a ServiceAccount authenticates as.
func serviceAccountUser(ns, sa string) string { return "system:serviceaccount:" + ns + ":" + sa }

// secretRoleBinding finds the chart's RoleBinding that lets the operator's ServiceAccount write
// Secrets in the release namespace (automatic mode's cert-controller), by what it grants rather
// than by name.
func secretRoleBinding(ctx context.Context, c *suite.Cluster, r *chart.Release, sa string) (*rbacv1.RoleBinding, error) {
	rbs, err := c.Kube().RbacV1().RoleBindings(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + r.Name})
	if err != nil {
		return nil, fmt.Errorf("listing RoleBindings of %s: %w", r, err)
	}
	var seen []string
	for i := range rbs.Items {
		rb := &rbs.Items[i]
		seen = append(seen, rb.Name)
		if rb.RoleRef.Kind != "Role" || !slices.ContainsFunc(rb.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == r.Namespace
		}) {
			continue
		}
		role, err := c.Kube().RbacV1().Roles(r.Namespace).Get(ctx, rb.RoleRef.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("getting Role %s/%s of RoleBinding %s: %w", r.Namespace, rb.RoleRef.Name, rb.Name, err)
		}
		for _, rule := range role.Rules {
			if slices.Contains(rule.Resources, "secrets") && slices.Contains(rule.Verbs, "create") {
				return rb, nil
			}
		}
	}
	return nil, fmt.Errorf("no RoleBinding of %s grants ServiceAccount %s/%s to create Secrets (RoleBindings: %v)", r, r.Namespace, sa, seen)
}

// canCreateSecrets asks the API server, like `kubectl auth can-i create secrets --as=…`.
func canCreateSecrets(ctx context.Context, c *suite.Cluster, ns, sa string) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               serviceAccountUser(ns, sa),
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "secrets"},
	}}
	got, err := c.Kube().AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("creating a SubjectAccessReview for %s: %w", sar.Spec.User, err)
	}
	return got.Status.Allowed, nil
}

// missingRBAC is T10: the cert-controller has lost its RBAC. Restarted without its Secret, the
// operator can neither create the Secret nor inject a CA; it logs the cert-controller's error
// and its new pod never becomes ready. Restoring RBAC (helm upgrade) lets it finish.
func missingRBAC() e2etypes.Feature {
	var ns, sa string
	var oldCA []byte
	var oldPods map[types.UID]bool
	return features.New("cert-controller RBAC missing: no Secret, no caBundle, a logged error until RBAC is restored").
		WithLabel(suite.LabelScenario, "T10").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		Setup(baseline("t10", &ns)).
		Assess("fault: the cert-controller's RoleBinding deleted, then its Secret deleted and the operator restarted so it must regenerate", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			var err error
			sa, err = serviceAccount(ctx, c, r)
			expect.NoError(t, err, "reading the operator's ServiceAccount")
			rb, err := secretRoleBinding(ctx, c, r, sa)
			expect.NoError(t, err, "finding the cert-controller's RoleBinding")
			expect.NoError(t, c.Kube().RbacV1().RoleBindings(r.Namespace).Delete(ctx, rb.Name, metav1.DeleteOptions{}),
				"deleting RoleBinding %s/%s", r.Namespace, rb.Name)
			t.Logf("deleted RoleBinding %s/%s (Role %s)", r.Namespace, rb.Name, rb.RoleRef.Name)
			// Delete the Secret only once the authorizer has caught up, or the running
			// operator would simply write a new one.
			expect.Eventually(ctx, t, "the API server to deny "+serviceAccountUser(r.Namespace, sa)+" creating Secrets", propagationTimeout,
				func(ctx context.Context) (bool, string, error) {
					allowed, err := canCreateSecrets(ctx, c, r.Namespace, sa)
					if err != nil {
						return false, err.Error(), nil
					}
					return !allowed, "still allowed", nil
				})
			oldCA, err = secretCA(ctx, c, r)
			expect.NoError(t, err, "reading the serving CA")
			oldPods, err = release.OperatorPodUIDs(ctx, c.Kube(), r)
			expect.NoError(t, err, "listing the operator pods")
			expect.NoError(t, c.Kube().CoreV1().Secrets(r.Namespace).Delete(ctx, r.SecretName(), metav1.DeleteOptions{}),
				"deleting Secret %s/%s", r.Namespace, r.SecretName())
			// The rollout cannot finish (the new pod never gets a certificate); the old pod keeps
			// serving meanwhile (maxUnavailable 0).
			expect.NoError(t, release.RolloutRestart(ctx, c.Kube(), r.Namespace, r.DeploymentName()), "restarting %s", r)
			return ctx
		})).
		Assess("symptom: the new pod logs the cert-controller's forbidden error; no Secret is created and the caBundle keeps the old CA", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			forbidden := fmt.Sprintf("is forbidden: User %q cannot", serviceAccountUser(r.Namespace, sa))
			what := fmt.Sprintf("a new operator pod to log a cert-controller error containing %q", forbidden)
			expect.Eventually(ctx, t, what, rolloutTimeout, func(ctx context.Context) (bool, string, error) {
				pods, err := release.OperatorPods(ctx, c.Kube(), r)
				if err != nil {
					return false, err.Error(), nil
				}
				logs, err := operatorLogs(ctx, c, r)
				if err != nil {
					return false, err.Error(), nil
				}
				var states []string
				for _, p := range pods {
					states = append(states, release.PodState(&p))
					if oldPods[p.UID] {
						continue
					}
					for _, e := range logs[p.Name] {
						if e.Logger == "cert-controller" && e.Level == "error" && strings.Contains(e.Error, forbidden) {
							t.Logf("pod %s logged: %s: %s", p.Name, e.Msg, e.Error)
							return true, "", nil
						}
					}
				}
				return false, "pods: " + strings.Join(states, "; "), nil
			})
			_, err := c.Kube().CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				expect.Errorf(t, "Secret %s/%s: expected it not created (the cert-controller may not create Secrets), saw %v", r.Namespace, r.SecretName(), errOrFound(err))
			}
			bundles, err := release.ReadCABundles(ctx, c.Kube(), c.CRDs(), r)
			expect.NoError(t, err, "reading the caBundles")
			if missing := bundles.Missing(oldCA); len(missing) > 0 {
				expect.Errorf(t, "caBundles: expected them to keep the old CA %s (nothing new injected), saw %s", pki.DescribePEM(oldCA), bundles.DescribeMissing(oldCA))
			}
			return ctx
		})).
		Assess(doctorNames(&ns, "T10", "cert-controller-rbac")).
		Assess("fix: helm upgrade restores the RBAC; the operator creates the Secret, injects its CA, and admission works", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			// helmUpgrade waits for the rollout the restart began: the new pod gets its
			// certificate on its next retry.
			expect.NoError(t, helmUpgrade(ctx, c, r), "helm upgrade of %s", r)
			ca, err := secretCA(ctx, c, r)
			expect.NoError(t, err, "reading the regenerated Secret")
			if string(ca) == string(oldCA) {
				expect.Errorf(t, "Secret %s/%s: expected a new CA after regeneration, saw the old one %s", r.Namespace, r.SecretName(), pki.DescribePEM(ca))
			}
			expect.NoError(t, release.WaitCABundles(ctx, c.Kube(), c.CRDs(), r, ca, propagationTimeout), "waiting for the new CA in every caBundle")
			expectEventuallyDenied(ctx, t, c, ns, "invalid", admissionTimeout)
			return ctx
		})).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			if sa == "" {
				return ctx
			}
			if allowed, err := canCreateSecrets(ctx, c, r.Namespace, sa); err != nil || !allowed {
				if err := helmUpgrade(ctx, c, r); err != nil {
					expect.Errorf(t, "restoring the cert-controller's RBAC: %v", err)
				}
			}
			return ctx
		})).
		Teardown(restored(&ns)).
		Feature()
}

func errOrFound(err error) string {
	if err == nil {
		return "it exists"
	}
	return err.Error()
}
