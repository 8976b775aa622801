package contract

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/doctor"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// The repair checks break the serving certificate the way users and tools do — W6 deletes the
// Secret, W7 empties every caBundle — and hold the target to its description
// (certModes.<mode>.repair): a fault it declares it repairs must be repaired within the time it
// declares, counted from the fault until its certificate verifies against every caBundle and
// every webhook answers; a fault it does not repair must be named by the generic doctor
// (kubectl webhook-doctor), the way a user would find it. Either way each check puts back what
// it took, so the checks after it find the target as installed.

// The doctor's checks that name the faults, and the troubleshooting scenarios they point to.
const (
	doctorCheckSecret   = "certificate-secret" // T11
	doctorCheckCABundle = "ca-bundle"          // T3
)

// secretDeleted is W6: the serving Secret deleted while the target runs.
func secretDeleted() e2etypes.Feature {
	var ns string
	var saved *corev1.Secret
	var deletedAt time.Time
	return features.New("the serving Secret deleted: repaired within the time the target documents, or named by the doctor").
		WithLabel(suite.LabelScenario, "W6").
		Setup(suite.NamespaceSetup(&ns, "w6")).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if it := suite.TargetFrom(ctx, t); it.Served.Secret == "" {
				expect.Skipf(t, "target %s names no Secret holding its serving certificate in %s mode: there is none to delete", it.Target.Name, it.Mode)
			}
			return ctx
		}).
		Assess("fault: the Secret holding the serving certificate deleted", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			secrets := c.Kube().CoreV1().Secrets(it.Namespace)
			s, err := secrets.Get(ctx, it.Served.Secret, metav1.GetOptions{})
			expect.NoError(t, err, "getting Secret %s/%s, the serving certificate", it.Namespace, it.Served.Secret)
			saved = s
			err = secrets.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(s.UID))})
			expect.NoError(t, err, "deleting Secret %s/%s", it.Namespace, s.Name)
			deletedAt = time.Now()
			return ctx
		}).
		Assess("the target repairs it within the time it documents, or the doctor names certificate-secret (T11)", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			within, repairs := it.Target.CertModes.Mode(it.Mode).Repair.SecretDeleted()
			if !repairs {
				expectDoctorNames(ctx, t, c, it, ns, "the Secret deleted", "secret", doctorCheckSecret, "T11")
				return ctx
			}
			deadline := deletedAt.Add(within)
			ref := it.Namespace + "/" + it.Served.Secret
			expect.Eventually(ctx, t, fmt.Sprintf("Secret %s back (target %s declares it repairs a deleted Secret within %s in %s mode)", ref, it.Target.Name, within, it.Mode), until(deadline),
				func(ctx context.Context) (bool, string, error) {
					s, err := c.Kube().CoreV1().Secrets(it.Namespace).Get(ctx, it.Served.Secret, metav1.GetOptions{})
					switch {
					case apierrors.IsNotFound(err):
						return false, "not found", nil
					case err != nil:
						return false, err.Error(), nil
					case s.UID == saved.UID:
						return false, "the deleted Secret, still terminating", nil
					}
					return true, "", nil
				})
			expectRepaired(ctx, t, c, it, ns, deadline, within)
			suite.Note(ctx, t, "repairedAfter", time.Since(deletedAt).Round(100*time.Millisecond).String())
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			if saved == nil {
				return ctx
			}
			// A pod that started while the Secret was gone waits in ContainerCreating: the
			// kubelet mounts the Secret once it is back, no restart needed.
			restored, err := restoreSecret(ctx, c, saved)
			if err != nil {
				expect.Errorf(t, "restoring Secret %s/%s: %v", saved.Namespace, saved.Name, err)
				return ctx
			}
			if restored {
				t.Logf("restored Secret %s/%s as it was before the check", saved.Namespace, saved.Name)
			}
			expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
			return ctx
		}).Feature()
}

// restoreSecret creates saved again unless a Secret of its name exists (the target repaired it);
// it reports whether it created it.
func restoreSecret(ctx context.Context, c *suite.Cluster, saved *corev1.Secret) (bool, error) {
	secrets := c.Kube().CoreV1().Secrets(saved.Namespace)
	if _, err := secrets.Get(ctx, saved.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return false, err
	}
	s := saved.DeepCopy()
	s.ObjectMeta = metav1.ObjectMeta{
		Name: s.Name, Namespace: s.Namespace, Labels: s.Labels, Annotations: s.Annotations,
		OwnerReferences: s.OwnerReferences, Finalizers: s.Finalizers,
	}
	_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
	return err == nil, err
}

// caBundleEmptied is W7: the caBundle of every webhook of the target's configurations emptied
// while the target runs (a Helm upgrade or a GitOps sync that re-applies manifests without it).
func caBundleEmptied() e2etypes.Feature {
	var ns string
	var saved savedBundles
	var emptiedAt time.Time
	return features.New("every webhook's caBundle emptied: refilled within the time the target documents, or named by the doctor").
		WithLabel(suite.LabelScenario, "W7").
		Setup(suite.NamespaceSetup(&ns, "w7")).
		Assess("fault: the caBundle of every webhook of the target's configurations emptied", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			saved = savedBundles{}
			err := editCABundles(ctx, c, it, func(w webhookRef, current []byte) []byte {
				saved[w] = current
				return nil
			})
			expect.NoError(t, err, "emptying the caBundles of target %s", it.Target.Name)
			emptiedAt = time.Now()
			return ctx
		}).
		Assess("the target refills them within the time it documents, or the doctor names ca-bundle (T3)", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			within, repairs := it.Target.CertModes.Mode(it.Mode).Repair.CABundleEmptied()
			if !repairs {
				expectDoctorNames(ctx, t, c, it, ns, "every caBundle emptied", "caBundle", doctorCheckCABundle, "T3")
				return ctx
			}
			deadline := emptiedAt.Add(within)
			expectRepaired(ctx, t, c, it, ns, deadline, within)
			suite.Note(ctx, t, "repairedAfter", time.Since(emptiedAt).Round(100*time.Millisecond).String())
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			if len(saved) == 0 {
				return ctx
			}
			err := editCABundles(ctx, c, it, func(w webhookRef, current []byte) []byte {
				if len(current) == 0 {
					return saved[w]
				}
				return current // the target refilled it
			})
			if err != nil {
				expect.Errorf(t, "restoring the caBundles of target %s: %v", it.Target.Name, err)
				return ctx
			}
			expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
			return ctx
		}).Feature()
}

// expectRepaired waits, until deadline, for what a repaired certificate means to the API server:
// the certificate the Service serves verifies against every caBundle, then every webhook
// answers its probe. within is the repair time the description declares, for the messages.
func expectRepaired(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed, ns string, deadline time.Time, within time.Duration) {
	t.Helper()
	what := fmt.Sprintf("every caBundle to verify the certificate Service %s/%s serves (target %s declares the repair within %s in %s mode)",
		it.Namespace, it.Served.Service, it.Target.Name, within, it.Mode)
	expect.Eventually(ctx, t, what, until(deadline), func(ctx context.Context) (bool, string, error) {
		chain, err := c.ServedCertificates(ctx, it.Namespace, it.Served.Service, it.Served.ServicePort)
		if err != nil {
			return false, "reading the served certificate: " + err.Error(), nil
		}
		refused, err := untrusted(ctx, c, it, chain)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(refused) == 0, strings.Join(refused, "; "), nil
	})
	expectAnswers(ctx, t, c, it, ns, deadline)
}

// expectDoctorNames runs the generic doctor against the target after fault, a fault the target
// does not repair in its mode (its description declares no repair.<field>), and requires the
// doctor to find the webhooks unhealthy with check (scenario's cause) among its root causes.
func expectDoctorNames(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed, ns, fault, field, check, scenario string) {
	t.Helper()
	rep, err := doctor.Webhook.Run(ctx, t.Logf, doctorArgs(c, it, ns)...)
	expect.NoError(t, err, "running the doctor against target %s", it.Target.Name)
	t.Logf("doctor: %s", rep)
	suite.Note(ctx, t, doctor.DiagnosisNote, []doctor.Diagnosis{doctor.Webhook.Diagnose(rep, check)})
	if rep.ExitCode != doctor.ExitUnhealthy || !rep.NamesRoot(check) {
		expect.Errorf(t, "%s: target %s declares no repair.%s in %s mode, so the doctor must name it: expected exit %d with root cause %s (%s), saw %s (if the target repairs it, declare certModes.%s.repair.%s)",
			fault, it.Target.Name, field, it.Mode, doctor.ExitUnhealthy, check, scenario, rep, it.Mode, field)
	}
}

// doctorsCluster is what the doctor's command line needs of a cluster (a *suite.Cluster).
type doctorsCluster interface {
	KubeconfigPath() string
	ServiceNetworkFromHost() bool
}

// doctorArgs is the generic doctor's command line for target it (dry runs in namespace ns), in
// cluster c: its Service, Secret and the configurations its chart renders, so that one of them
// deleted is named (T1), and how to reach the webhook from this machine.
func doctorArgs(c doctorsCluster, it *target.Installed, ns string) []string {
	args := []string{"--kubeconfig", c.KubeconfigPath(), "--namespace", it.Namespace, "--service", it.Served.Service,
		"--secret", it.Served.Secret, "--test-namespace", ns, "-o", "json"}
	validating, mutating := it.Served.Configurations()
	for _, name := range slices.Concat(validating, mutating) {
		args = append(args, "--configuration", name)
	}
	return append(args, doctor.ConnectArgs(c.ServiceNetworkFromHost())...)
}

// webhookRef names one webhook in one configuration.
type webhookRef struct {
	mutating      bool
	configuration string
	webhook       string
}

// savedBundles are the caBundles a check took, by webhook.
type savedBundles map[webhookRef][]byte

// editCABundles sets the caBundle of every webhook of it's configurations to what edit returns
// for it given the current one, updating each configuration whose bundles change (again on a
// conflict with the target's own writes).
func editCABundles(ctx context.Context, c *suite.Cluster, it *target.Installed, edit func(w webhookRef, current []byte) []byte) error {
	validating, mutating := it.Served.Configurations()
	api := c.Kube().AdmissionregistrationV1()
	for _, name := range validating {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cfg, err := api.ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var slots []bundleSlot
			for i := range cfg.Webhooks {
				slots = append(slots, bundleSlot{cfg.Webhooks[i].Name, &cfg.Webhooks[i].ClientConfig})
			}
			if !editSlots(slots, webhookRef{configuration: name}, edit) {
				return nil
			}
			_, err = api.ValidatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("updating the caBundles of ValidatingWebhookConfiguration %s: %w", name, err)
		}
	}
	for _, name := range mutating {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cfg, err := api.MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var slots []bundleSlot
			for i := range cfg.Webhooks {
				slots = append(slots, bundleSlot{cfg.Webhooks[i].Name, &cfg.Webhooks[i].ClientConfig})
			}
			if !editSlots(slots, webhookRef{mutating: true, configuration: name}, edit) {
				return nil
			}
			_, err = api.MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("updating the caBundles of MutatingWebhookConfiguration %s: %w", name, err)
		}
	}
	return nil
}

// bundleSlot is where one webhook of a configuration keeps its caBundle.
type bundleSlot struct {
	webhook string
	cc      *admissionregistrationv1.WebhookClientConfig
}

// editSlots sets each slot's caBundle to what edit returns for it (ref names the configuration)
// and reports whether any changed.
func editSlots(slots []bundleSlot, ref webhookRef, edit func(webhookRef, []byte) []byte) bool {
	changed := false
	for _, s := range slots {
		ref.webhook = s.webhook
		if next := edit(ref, s.cc.CABundle); !bytes.Equal(next, s.cc.CABundle) {
			s.cc.CABundle, changed = next, true
		}
	}
	return changed
}
