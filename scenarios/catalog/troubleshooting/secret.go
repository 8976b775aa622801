package troubleshooting

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// secretHold keeps one Secret from being created, with a ValidatingAdmissionPolicy: T11 needs
// the "Secret deleted while running" state to last long enough to be observed, and the
// operator watches its Secret and writes a new one within milliseconds. The hold stands in for
// the time before anything recreates it; it touches neither the operator nor its RBAC, so
// the doctor must find the missing Secret on its own.
type secretHold struct {
	name    string // of the policy and its binding
	message string
}

// holdSecret denies creating Secret ns/secret until release is called, and waits until the
// API server enforces it.
func holdSecret(ctx context.Context, c *suite.Cluster, ns, secret string) (*secretHold, error) {
	h := &secretHold{name: "gauntlet-t11-hold-" + rand.String(5), message: "gauntlet T11 holds Secret " + ns + "/" + secret + " deleted"}
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: h.name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.name != %q", secret),
				Message:    h.message,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: h.name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        h.name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			},
		},
	}
	api := c.Kube().AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating ValidatingAdmissionPolicy %s: %w", h.name, err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		_ = h.release(ctx, c)
		return nil, fmt.Errorf("creating ValidatingAdmissionPolicyBinding %s: %w", h.name, err)
	}
	// A dry-run create of the (still existing) Secret is denied by the policy once it is in
	// force; before that it fails with AlreadyExists.
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: ns}}
	err := poll.Until(ctx, "ValidatingAdmissionPolicy "+h.name+" to be enforced", propagationTimeout, func(ctx context.Context) (bool, string, error) {
		_, err := c.Kube().CoreV1().Secrets(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), h.message), errOrAdmitted(err), nil
	})
	if err != nil {
		_ = h.release(ctx, c)
		return nil, err
	}
	return h, nil
}

// release deletes the policy and its binding; a hold already released is not an error.
func (h *secretHold) release(ctx context.Context, c *suite.Cluster) error {
	if h == nil {
		return nil
	}
	api := c.Kube().AdmissionregistrationV1()
	if err := ignoreNotFound(api.ValidatingAdmissionPolicyBindings().Delete(ctx, h.name, metav1.DeleteOptions{})); err != nil {
		return fmt.Errorf("deleting ValidatingAdmissionPolicyBinding %s: %w", h.name, err)
	}
	if err := ignoreNotFound(api.ValidatingAdmissionPolicies().Delete(ctx, h.name, metav1.DeleteOptions{})); err != nil {
		return fmt.Errorf("deleting ValidatingAdmissionPolicy %s: %w", h.name, err)
	}
	return nil
}

// deletedSecret is T11: the certificate Secret deleted while the operator runs. The operator
// keeps serving the certificate it loaded (and, in this implementation, writes a new Secret at
// once); the documented regeneration — delete the Secret and restart — yields a new CA and
// certificate that every caBundle and the webhook follow.
func deletedSecret() e2etypes.Feature {
	var ns string
	var before pki.SecretCertificates
	var hold *secretHold
	return features.New("Secret deleted while running: the operator keeps serving; delete + rollout restart regenerates").
		WithLabel(suite.LabelScenario, "T11").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		Setup(baseline("t11", &ns)).
		Assess("the running operator writes a deleted Secret again on its own; admission keeps working", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			s, err := c.Kube().CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{})
			expect.NoError(t, err, "getting Secret %s/%s", r.Namespace, r.SecretName())
			expect.NoError(t, c.Kube().CoreV1().Secrets(r.Namespace).Delete(ctx, r.SecretName(), metav1.DeleteOptions{}),
				"deleting Secret %s/%s", r.Namespace, r.SecretName())
			what := fmt.Sprintf("the operator to write Secret %s/%s again (old UID %s)", r.Namespace, r.SecretName(), s.UID)
			expect.Eventually(ctx, t, what, propagationTimeout, func(ctx context.Context) (bool, string, error) {
				got, err := c.Kube().CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				return got.UID != s.UID, "still the old Secret", nil
			})
			expect.NoError(t, release.WaitAdmission(ctx, c.Dynamic(), r, admissionTimeout), "admission after the Secret was written again")
			return ctx
		})).
		Assess("fault: the Secret deleted while running, and kept deleted", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			var err error
			before, err = release.ReadSecretCertificates(ctx, c.Kube(), r)
			expect.NoError(t, err, "reading the certificate Secret")
			hold, err = holdSecret(ctx, c, r.Namespace, r.SecretName())
			expect.NoError(t, err, "holding Secret %s/%s deleted", r.Namespace, r.SecretName())
			expect.NoError(t, c.Kube().CoreV1().Secrets(r.Namespace).Delete(ctx, r.SecretName(), metav1.DeleteOptions{}),
				"deleting Secret %s/%s", r.Namespace, r.SecretName())
			return ctx
		})).
		Assess("symptom: no Secret, yet the operator keeps serving the certificate it loaded and admission works", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			_, err := c.Kube().CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				expect.Errorf(t, "Secret %s/%s: expected it absent, saw %s", r.Namespace, r.SecretName(), errOrFound(err))
			}
			chain, err := c.ServedCertificates(ctx, r.Namespace, r.ServiceName(), 443)
			expect.NoError(t, err, "reading the served certificate")
			if !chain[0].Equal(before.Leaf) {
				expect.Errorf(t, "served certificate: expected the one loaded before the deletion (%s), saw %s", pki.Describe(before.Leaf), pki.Describe(chain[0]))
			}
			expectDenied(ctx, t, c, ns, "invalid")
			return ctx
		})).
		Assess(doctorNames(&ns, "T11", "certificate-secret")).
		Assess("documented fix: kubectl delete secret + rollout restart regenerates the CA and certificate; caBundles and the webhook follow", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expect.NoError(t, hold.release(ctx, c), "releasing the hold on the Secret")
			err := ignoreNotFound(c.Kube().CoreV1().Secrets(r.Namespace).Delete(ctx, r.SecretName(), metav1.DeleteOptions{}))
			expect.NoError(t, err, "deleting Secret %s/%s", r.Namespace, r.SecretName())
			expect.NoError(t, rolloutRestart(ctx, c, r), "restarting %s", r)
			after, err := release.ReadSecretCertificates(ctx, c.Kube(), r)
			expect.NoError(t, err, "reading the regenerated Secret")
			if after.CA.Equal(before.CA) || after.Leaf.Equal(before.Leaf) {
				expect.Errorf(t, "Secret %s/%s: expected a new CA and certificate (old: %s), saw %s", r.Namespace, r.SecretName(), before, after)
			}
			expect.NoError(t, release.WaitCABundles(ctx, c.Kube(), c.CRDs(), r, after.Secret.Data["ca.crt"], propagationTimeout),
				"waiting for the new CA in every caBundle")
			expectServed(ctx, t, c, r, after.Leaf)
			expectEventuallyDenied(ctx, t, c, ns, "invalid", admissionTimeout)
			return ctx
		})).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			if err := hold.release(ctx, c); err != nil {
				expect.Errorf(t, "releasing the hold on the Secret: %v", err)
			}
			if _, err := c.Kube().CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
				if err := rolloutRestart(ctx, c, r); err != nil {
					expect.Errorf(t, "regenerating Secret %s/%s: %v", r.Namespace, r.SecretName(), err)
				}
			}
			return ctx
		})).
		Teardown(restored(&ns)).
		Feature()
}
