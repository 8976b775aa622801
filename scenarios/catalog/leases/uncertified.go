package leases

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// uncertifiedWatch is how long M9 watches B's new pod run without a certificate: long enough
// for a readiness probe to have reported it ready, or for it to have taken its Lease, were it
// wrong to.
const uncertifiedWatch = 5 * time.Second

// uncertifiedStopSlack bounds how much longer than its preStop sleep B may take to exit
// (about 2 s here; 30 s when shutdown waits for the certificate).
const uncertifiedStopSlack = 10 * time.Second

// uncertifiedStop is M9: a restricted operator whose certificate never becomes loadable — its
// serving certificate cannot be stored (the RoleBinding for its Secret is gone, and so is the
// Secret) — never serves, so it never takes its namespace's Lease: A keeps validating the
// namespace, and B is never reported Ready. Stopped while it waits, it exits promptly and
// leaves no Lease. An operator that took its Lease before its webhooks answer would leave the
// namespace validated by nobody for as long as it waits.
func (s *scenarios) uncertifiedStop() types.Feature {
	return features.New("a restricted operator that never got its certificate never takes its Lease, is never Ready, and stops promptly").
		WithLabel(suite.LabelScenario, "M9").
		Assess("B without a storable certificate leaves team-a to A, is not Ready, and stops promptly", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			a, b := s.opA(), s.opB()
			ns := b.rel.RestrictedNamespace()
			s.opB().settled(ctx, t, c)

			binding := s.removeCertificateRights(ctx, t, c)
			t.Cleanup(func() { s.restoreCertificateRights(ctx, t, c, binding) })
			s.opB().stop(ctx, t, c)
			s.opB().scale(ctx, t, c, 1)

			var pod corev1.Pod
			expect.Eventually(ctx, t, fmt.Sprintf("a new pod of %s to run", b), recoverTimeout,
				func(ctx context.Context) (bool, string, error) {
					pods, err := b.runningPods(ctx, c)
					if err != nil || len(pods) != 1 {
						return false, fmt.Sprintf("running pods: %d, %v", len(pods), err), nil
					}
					pod = pods[0]
					return true, "", nil
				})
			t.Logf("%s pod %s runs without a storable certificate", b, pod.Name)

			err := poll.Throughout(ctx, fmt.Sprintf("%s pod %s neither to be Ready nor to hold Lease %s/%s while its serving certificate cannot be stored (Secret %s/%s deleted, its RoleBinding removed)",
				b, pod.Name, ns, release.NamespaceLockLease, b.rel.Namespace, b.rel.SecretName()),
				probeEvery, uncertifiedWatch, func(ctx context.Context) (bool, string, error) {
					got, err := c.Kube().CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
					if err != nil {
						return false, "", fmt.Errorf("reading pod %s/%s: %w", pod.Namespace, pod.Name, err)
					}
					if release.PodReady(got) {
						return false, "it reported Ready: " + release.PodState(got), nil
					}
					if l := readLease(ctx, t, c, ns); l != nil {
						return false, fmt.Sprintf("the Lease is held, so A skips %s while B cannot answer: %s", ns, describeLease(l)), nil
					}
					return true, "", nil
				})
			expect.NoError(t, err, "watching the uncertified pod")
			// The namespace stays validated: A denies an invalid object there.
			name := "m9-invalid-" + rand.String(5)
			_, err = c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, dynamo.InvalidGraphDeployment(ns, name),
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if want := dynamo.DeniedBy(dynamo.GraphDeploymentValidatingWebhook); err == nil || !strings.Contains(err.Error(), want) {
				expect.Fatalf(t, "expected the invalid DynamoGraphDeployment %s/%s, created while B waits for its certificate, denied with %q (by A: B holds no Lease); got %v", ns, name, want, err)
			}
			expect.Eventually(ctx, t, fmt.Sprintf("%s to log %q for %s/%s with result=%s", a, msgValidateCreate, ns, name, resultDenied), observeTimeout,
				func(ctx context.Context) (bool, string, error) {
					entries, err := a.readLogs(ctx, c)
					if err != nil {
						return false, err.Error(), nil
					}
					got := results(admissionsOf(entries, msgValidateCreate, ns, name))
					return slices.Equal(got, []string{resultDenied}), fmt.Sprintf("results %v", got), nil
				})

			st := s.opB().stop(ctx, t, c)
			gone := st.effective.Sub(st.asked)
			if bound := preStopSleep(&pod) + uncertifiedStopSlack; gone > bound {
				expect.Errorf(t, "expected %s pod %s, stopped while it waited for a certificate, to exit within its preStop sleep + %s (%s); it took %.2fs — a shutdown that waits for a certificate holds its pod for the whole grace period",
					b, pod.Name, uncertifiedStopSlack, bound, gone.Seconds())
			}
			if l := readLease(ctx, t, c, ns); l != nil {
				expect.Errorf(t, "expected no Lease %s/%s after %s pod %s, which never served, stopped; found %s", ns, release.NamespaceLockLease, b, pod.Name, describeLease(l))
			}
			suite.Note(ctx, t, "podGoneSeconds", round3(gone.Seconds()))
			return ctx
		}).
		Feature()
}

// certificateRoleBinding is the RoleBinding that lets B store its serving certificate in its
// Secret (automatic mode): <operator>-certs in the release namespace.
func certificateRoleBinding(r *chart.Release) string { return r.DeploymentName() + "-certs" }

// removeCertificateRights deletes B's certificate RoleBinding and then its Secret, so a new
// pod of B can neither read nor store a certificate; it returns the RoleBinding to restore.
func (s *scenarios) removeCertificateRights(ctx context.Context, t *testing.T, c *suite.Cluster) *rbacv1.RoleBinding {
	t.Helper()
	b := s.opB()
	rbs := c.Kube().RbacV1().RoleBindings(b.rel.Namespace)
	rb, err := rbs.Get(ctx, certificateRoleBinding(b.rel), metav1.GetOptions{})
	expect.NoError(t, err, "reading RoleBinding %s/%s (the chart's, automatic mode)", b.rel.Namespace, certificateRoleBinding(b.rel))
	expect.NoError(t, rbs.Delete(ctx, rb.Name, metav1.DeleteOptions{}), "deleting RoleBinding %s/%s", rb.Namespace, rb.Name)
	err = c.Kube().CoreV1().Secrets(b.rel.Namespace).Delete(ctx, b.rel.SecretName(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		expect.Fatalf(t, "deleting Secret %s/%s: %v", b.rel.Namespace, b.rel.SecretName(), err)
	}
	t.Logf("deleted RoleBinding %s/%s and Secret %s/%s", rb.Namespace, rb.Name, b.rel.Namespace, b.rel.SecretName())
	return rb
}

// restoreCertificateRights is M9's cleanup: the RoleBinding back as the chart made it, and B
// restarted so it stores a new certificate and takes its namespace again.
func (s *scenarios) restoreCertificateRights(ctx context.Context, t *testing.T, c *suite.Cluster, rb *rbacv1.RoleBinding) {
	t.Helper()
	restored := rb.DeepCopy()
	restored.ObjectMeta = metav1.ObjectMeta{Name: rb.Name, Namespace: rb.Namespace, Labels: rb.Labels, Annotations: rb.Annotations}
	_, err := c.Kube().RbacV1().RoleBindings(rb.Namespace).Create(ctx, restored, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		expect.Errorf(t, "restoring RoleBinding %s/%s: %v", rb.Namespace, rb.Name, err)
		return
	}
	s.opB().scale(ctx, t, c, 0)
	expect.Eventually(ctx, t, "every pod of "+s.opB().String()+" to be gone", recoverTimeout, func(ctx context.Context) (bool, string, error) {
		pods, err := release.OperatorPods(ctx, c.Kube(), s.opB().rel)
		if err != nil && !errors.Is(err, release.ErrNoPods) {
			return false, err.Error(), nil
		}
		return len(pods) == 0, fmt.Sprintf("%d pods", len(pods)), nil
	})
	s.opB().start(ctx, t, c)
}
