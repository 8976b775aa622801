package troubleshooting

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/doctor"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// deletedValidatingConfiguration is T1: with the ValidatingWebhookConfiguration deleted, an
// invalid object is accepted and the operator never sees it; `helm upgrade` restores it.
func deletedValidatingConfiguration() e2etypes.Feature {
	var ns string
	return features.New("ValidatingWebhookConfiguration deleted: invalid objects accepted until helm upgrade restores it").
		WithLabel(suite.LabelScenario, "T1").
		Setup(baseline("t1", &ns)).
		Assess("fault: kubectl delete validatingwebhookconfiguration <release>-validating", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			err := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, r.ValidatingName(), metav1.DeleteOptions{})
			expect.NoError(t, err, "deleting ValidatingWebhookConfiguration %s", r.ValidatingName())
			return ctx
		})).
		Assess("symptom: an invalid DynamoGraphDeployment is accepted and the operator logs no validation of it", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			// The API server drops a deleted configuration from its informer within moments.
			expect.Eventually(ctx, t, "an invalid DynamoGraphDeployment in "+ns+" to pass a server-side dry run", propagationTimeout,
				func(ctx context.Context) (bool, string, error) {
					_, err := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx,
						dynamo.InvalidGraphDeployment(ns, "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
					return err == nil, errOrAdmitted(err), nil
				})
			// The mutating webhook still runs, so its "default" log line proves the log is
			// current when the "validate create" line is looked for.
			expectAdmittedUnvalidated(ctx, t, c, ns, true)
			expectNoValidationLogged(ctx, t, c, r, ns, graphName)
			return ctx
		})).
		Assess(doctorNames(&ns, "T1", "webhook-configurations")).
		Assess("fix: helm upgrade restores the configuration; invalid objects are denied again", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expect.NoError(t, helmUpgrade(ctx, c, r), "helm upgrade of %s", r)
			_, err := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, r.ValidatingName(), metav1.GetOptions{})
			expect.NoError(t, err, "getting ValidatingWebhookConfiguration %s after helm upgrade", r.ValidatingName())
			expectEventuallyDenied(ctx, t, c, ns, "invalid", admissionTimeout)
			return ctx
		})).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			_, err := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, r.ValidatingName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				if err := helmUpgrade(ctx, c, r); err != nil {
					expect.Errorf(t, "restoring ValidatingWebhookConfiguration %s: %v", r.ValidatingName(), err)
				}
			}
			return ctx
		})).
		Teardown(restored(&ns)).
		Feature()
}

// expectNoValidationLogged checks the operator's logs: the mutating webhook's "default" line for
// ns/name is there (the log is current), its "validate create" line is not.
func expectNoValidationLogged(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, ns, name string) {
	t.Helper()
	var logs podLogs
	expect.Eventually(ctx, t, fmt.Sprintf("the operator to log the mutating webhook's \"default\" line for %s/%s", ns, name), propagationTimeout,
		func(ctx context.Context) (bool, string, error) {
			var err error
			if logs, err = operatorLogs(ctx, c, r); err != nil {
				return false, err.Error(), nil
			}
			return len(logs.find(admissionLine("default", ns, name))) > 0, fmt.Sprintf("%d operator pods' logs without it", len(logs)), nil
		})
	if got := logs.find(admissionLine("validate create", ns, name)); len(got) > 0 {
		expect.Errorf(t, "operator logs: expected no \"validate create\" line for %s/%s, saw %d (result %q)", ns, name, len(got), got[0].Result)
	}
}

// unmatchedNamespaceSelector is T2: webhooks whose namespaceSelector does not match a namespace
// never see its objects; labelling the namespace (or fixing the selector) restores admission.
func unmatchedNamespaceSelector() e2etypes.Feature {
	var ns string
	const label, value = "gauntlet.dev/dynamo-webhooks", "enabled"
	selector := map[string]any{"webhook": map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{label: value}}}}
	return features.New("namespaceSelector does not match the namespace: invalid objects accepted until the namespace is labelled").
		WithLabel(suite.LabelScenario, "T2").
		Setup(baseline("t2", &ns)).
		Assess("fault: helm upgrade --set webhook.namespaceSelector.matchLabels."+label+"="+value, suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expect.NoError(t, helmUpgrade(ctx, c, withValues(r, selector)), "helm upgrade of %s with a namespaceSelector", r)
			return ctx
		})).
		Assess("symptom: an invalid DynamoGraphDeployment in the unlabelled namespace is accepted", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			expect.Eventually(ctx, t, "an invalid DynamoGraphDeployment in "+ns+" to pass a server-side dry run", propagationTimeout,
				func(ctx context.Context) (bool, string, error) {
					_, err := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx,
						dynamo.InvalidGraphDeployment(ns, "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
					return err == nil, errOrAdmitted(err), nil
				})
			// The selector is on every webhook: not even the mutating one runs.
			expectAdmittedUnvalidated(ctx, t, c, ns, false)
			return ctx
		}).
		Assess(doctorNames(&ns, "T2", "namespace-selector")).
		Assess("fix: kubectl label namespace "+label+"="+value+"; invalid objects are denied again", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, label, value)
			_, err := c.Kube().CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			expect.NoError(t, err, "labelling Namespace %s", ns)
			expectEventuallyDenied(ctx, t, c, ns, "invalid", admissionTimeout)
			return ctx
		}).
		Teardown(upgradeBack("restoring the namespaceSelector of")).
		Teardown(restored(&ns)).
		Feature()
}

// caBundleObservation is what a user sees while a wrong caBundle is in place, taken in one go
// so that it can be checked the fault was still in place afterwards.
type caBundleObservation struct {
	err      error // of a server-side dry run of a valid DynamoGraphDeployment
	doing    string
	report   doctor.Report
	attempts int
}

// caBundlePropagation bounds how long the API server may go on calling a webhook with the
// caBundle it had before a change.
const caBundlePropagation = 10 * time.Second

// maxObservationAttempts bounds how often a fault the operator repairs on its own is injected
// again because the repair came before the observation was complete.
const maxObservationAttempts = 5

// observeWrongCABundle sets bundle as the caBundle of every webhook of the release's
// ValidatingWebhookConfiguration, then takes the symptom (a dry-run create) and the doctor's
// report. The operator re-injects the right CA every --cert-check-interval, which can land
// inside the observation; an observation counts only if the bundle was still in place after
// it, otherwise the fault is injected again (at most maxObservationAttempts times).
func observeWrongCABundle(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, ns string, bundle []byte) caBundleObservation {
	t.Helper()
	var obs caBundleObservation
	for obs.attempts = 1; ; obs.attempts++ {
		expect.NoError(t, setValidatingCABundle(ctx, c, r, bundle), "setting the caBundle of ValidatingWebhookConfiguration %s", r.ValidatingName())
		name := fmt.Sprintf("valid-%d", obs.attempts)
		obs.doing = fmt.Sprintf("server-side dry-run create of a valid DynamoGraphDeployment %s/%s", ns, name)
		// The API server's webhook client picks the new bundle up from its informer, so the
		// first dry runs may still pass with the old one; the last answer is the observation.
		_ = poll.Until(ctx, "the API server to call the webhook with the new caBundle", caBundlePropagation, func(ctx context.Context) (bool, string, error) {
			_, obs.err = c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, dynamo.GraphDeployment(ns, name),
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return obs.err != nil, "the dry run was admitted", nil
		})
		rep, err := runDoctor(ctx, t, c, targetOf(r, ns))
		expect.NoError(t, err, "running the doctor for %s", r)
		obs.report = rep
		held, seen, err := validatingCABundleIs(ctx, c, r, bundle)
		expect.NoError(t, err, "reading ValidatingWebhookConfiguration %s", r.ValidatingName())
		if held {
			return obs
		}
		if obs.attempts == maxObservationAttempts {
			expect.Fatalf(t, "expected the wrong caBundle to stay in place for one observation (a dry run and a doctor run), saw the operator replace it %d times in a row (now %s)",
				obs.attempts, seen)
		}
		t.Logf("the operator re-injected the caBundle during observation %d (%s); injecting the fault again", obs.attempts, seen)
	}
}

// setValidatingCABundle writes bundle (nil: none) into every webhook of the release's
// ValidatingWebhookConfiguration, as `kubectl patch` would.
func setValidatingCABundle(ctx context.Context, c *suite.Cluster, r *chart.Release, bundle []byte) error {
	api := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations()
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		vwc, err := api.Get(ctx, r.ValidatingName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range vwc.Webhooks {
			vwc.Webhooks[i].ClientConfig.CABundle = bundle
		}
		_, err = api.Update(ctx, vwc, metav1.UpdateOptions{})
		return err
	})
}

// validatingCABundleIs reports whether every webhook of the release's
// ValidatingWebhookConfiguration carries exactly bundle, and otherwise what it carries.
func validatingCABundleIs(ctx context.Context, c *suite.Cluster, r *chart.Release, bundle []byte) (bool, string, error) {
	vwc, err := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, r.ValidatingName(), metav1.GetOptions{})
	if err != nil {
		return false, "", err
	}
	for _, w := range vwc.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
			return false, describeBundle(w), nil
		}
	}
	return true, "", nil
}

func describeBundle(w admissionregistrationv1.ValidatingWebhook) string {
	if len(w.ClientConfig.CABundle) == 0 {
		return "webhook " + w.Name + ": empty caBundle"
	}
	return "webhook " + w.Name + ": caBundle " + pki.DescribePEM(w.ClientConfig.CABundle)
}

// secretCA is ca.crt of the release's certificate Secret.
func secretCA(ctx context.Context, c *suite.Cluster, r *chart.Release) ([]byte, error) {
	s, err := c.Kube().CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting Secret %s/%s: %w", r.Namespace, r.SecretName(), err)
	}
	ca := s.Data["ca.crt"]
	if len(ca) == 0 {
		return nil, fmt.Errorf("no ca.crt in Secret %s/%s (keys: %v)", r.Namespace, r.SecretName(), keysOf(s))
	}
	return ca, nil
}

func keysOf(s *corev1.Secret) []string {
	var out []string
	for k := range s.Data {
		out = append(out, k)
	}
	return out
}

// unknownAuthority is the symptom of T3, verbatim.
var unknownAuthority = quoted("x509: certificate signed by unknown authority")

// foreignCABundle is T3: a caBundle that is empty or from another CA makes the API server
// reject the served certificate; the operator re-injects the right CA on its own within its
// check interval, and a restart re-injects it at startup.
func foreignCABundle() e2etypes.Feature {
	var ns string
	var obs caBundleObservation
	return features.New("caBundle empty or from another CA: x509 unknown authority until the operator re-injects").
		WithLabel(suite.LabelScenario, "T3").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		Setup(baseline("t3", &ns)).
		Assess("fault: the caBundle of every validating webhook replaced by another CA's", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			other, err := pki.NewCertificateAuthority("gauntlet T3 unrelated CA", 24*time.Hour)
			expect.NoError(t, err, "creating an unrelated CA")
			obs = observeWrongCABundle(ctx, t, c, r, ns, other.PEM)
			suite.Note(ctx, t, "observationAttempts", obs.attempts)
			return ctx
		})).
		Assess("symptom: failed calling webhook … x509: certificate signed by unknown authority", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			expectFailsWith(t, obs.doing, obs.err, failedCallPrefix, unknownAuthority)
			return ctx
		}).
		Assess("the doctor names T3 (ca-bundle) as the one root cause", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			r := suite.ReleaseFrom(ctx, t)
			t.Logf("doctor: %s", obs.report)
			checkDoctorNames(t, obs.report, targetOf(r, ns), "T3", "ca-bundle")
			suite.Note(ctx, t, doctor.DiagnosisNote, []doctor.Diagnosis{doctor.Dynamo.Diagnose(obs.report, "ca-bundle")})
			return ctx
		}).
		Assess("fix (automatic): the operator re-injects the Secret's CA within its check interval", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			interval, err := r.CheckInterval()
			expect.NoError(t, err, "reading the release's check interval")
			ca, err := secretCA(ctx, c, r)
			expect.NoError(t, err, "reading the serving CA")
			// One interval for the periodic check to come round, one more for its retry
			// back-off, plus slack for a loaded machine.
			bound := 2*interval + 30*time.Second
			start := time.Now()
			if err := release.WaitCABundles(ctx, c.Kube(), c.CRDs(), r, ca, bound); err != nil {
				expect.Fatalf(t, "expected the operator to re-inject ca.crt of Secret %s/%s within 2×--cert-check-interval (%s) + 30s without a restart: %v",
					r.Namespace, r.SecretName(), interval, err)
			}
			suite.Note(ctx, t, "reinjectedAfterSeconds", time.Since(start).Round(100*time.Millisecond).Seconds())
			expectEventuallyDenied(ctx, t, c, ns, "invalid", admissionTimeout)
			return ctx
		})).
		Assess("fault: the caBundle emptied: the same symptom, and the doctor names T3 again", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			empty := observeWrongCABundle(ctx, t, c, r, ns, nil)
			expectFailsWith(t, empty.doing, empty.err, failedCallPrefix, unknownAuthority)
			t.Logf("doctor: %s", empty.report)
			checkDoctorNames(t, empty.report, targetOf(r, ns), "T3", "ca-bundle")
			suite.Note(ctx, t, doctor.DiagnosisNote, []doctor.Diagnosis{doctor.Dynamo.Diagnose(obs.report, "ca-bundle"), doctor.Dynamo.Diagnose(empty.report, "ca-bundle")})
			return ctx
		})).
		Assess("fix (restart): kubectl rollout restart re-injects the CA at startup", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expect.NoError(t, rolloutRestart(ctx, c, r), "restarting the operator")
			ca, err := secretCA(ctx, c, r)
			expect.NoError(t, err, "reading the serving CA")
			// The operator injects before it serves: once the new pod is Available the bundle holds.
			bundles, err := release.ReadCABundles(ctx, c.Kube(), c.CRDs(), r)
			expect.NoError(t, err, "reading the caBundles")
			if missing := bundles.Missing(ca); len(missing) > 0 {
				expect.Errorf(t, "after the restart: expected every caBundle to hold ca.crt of Secret %s/%s, saw %s", r.Namespace, r.SecretName(), bundles.DescribeMissing(ca))
			}
			expectEventuallyDenied(ctx, t, c, ns, "invalid", admissionTimeout)
			return ctx
		})).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			ca, err := secretCA(ctx, c, r)
			if err != nil {
				expect.Errorf(t, "restoring the caBundle: %v", err)
				return ctx
			}
			if bundles, err := release.ReadCABundles(ctx, c.Kube(), c.CRDs(), r); err != nil || len(bundles.Missing(ca)) > 0 {
				if err := rolloutRestart(ctx, c, r); err != nil {
					expect.Errorf(t, "restoring the caBundle with a restart: %v", err)
				}
			}
			return ctx
		})).
		Teardown(restored(&ns)).
		Feature()
}
