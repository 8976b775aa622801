package certmodes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// userServing is the certificate the user brought in external or OLM mode.
func userServing(t *testing.T, r *chart.Release) *pki.ServingCertificate {
	t.Helper()
	if r.Serving == nil {
		expect.Fatalf(t, "%s: expected the serving certificate the user brought (Release.Serving), saw none", r)
	}
	return r.Serving
}

// externalSecretServed is C9: in external mode the operator serves the certificate of the
// user's Secret, the API server trusts it through the caBundle value the user set, and the
// operator never writes the Secret — not at startup, not in its periodic checks.
func externalSecretServed() types.Feature {
	var snapshot *corev1.Secret
	var w watch.Interface
	return features.New("external: the user's Secret and caBundle are served and the Secret is never written").
		WithLabel(suite.LabelScenario, "C9").
		WithLabel(suite.LabelCertMode, string(chart.External)).
		Setup(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			secrets := c.Kube().CoreV1().Secrets(r.Namespace)
			var err error
			snapshot, err = secrets.Get(ctx, r.SecretName(), metav1.GetOptions{})
			expect.NoError(t, err, "getting Secret %s/%s", r.Namespace, r.SecretName())
			// Watching from the snapshot's resourceVersion sees every later write, however brief.
			w, err = secrets.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + r.SecretName(), ResourceVersion: snapshot.ResourceVersion})
			expect.NoError(t, err, "watching Secret %s/%s", r.Namespace, r.SecretName())
			return ctx
		})).
		Assess("the webhook Service serves the user's certificate", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectServed(ctx, t, c, r, userServing(t, r).Leaf)
			return ctx
		})).
		Assess("every caBundle is the user's webhook.caBundle and admission works", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectCABundles(ctx, t, c, r, userServing(t, r).CAPEM)
			expectAdmission(ctx, t, c, r, "with the user's certificate")
			return ctx
		})).
		Assess("through a restart and its periodic checks the operator never writes the Secret", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			restartOperator(ctx, t, c, r, operatorPodUIDs(ctx, t, c, r))
			expectServed(ctx, t, c, r, userServing(t, r).Leaf)
			// Two check intervals after the new pod is up, at least one periodic check ran.
			observe := 2*checkInterval(t, r) + 5*time.Second
			var writes []string
			timeout := time.After(observe)
		watching:
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						expect.Fatalf(t, "watching Secret %s/%s: the watch ended early; writes seen so far: %v", r.Namespace, r.SecretName(), writes)
					}
					writes = append(writes, describeWrite(ev))
				case <-timeout:
					break watching
				}
			}
			suite.Note(ctx, t, "observedSeconds", observe.Seconds())
			if len(writes) > 0 {
				expect.Errorf(t, "Secret %s/%s: expected no write in external mode over %s, saw %s", r.Namespace, r.SecretName(), observe, strings.Join(writes, "; "))
			}
			now, err := c.Kube().CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{})
			expect.NoError(t, err, "getting Secret %s/%s", r.Namespace, r.SecretName())
			expect.Equal(t, "resourceVersion of Secret "+r.Namespace+"/"+r.SecretName(), snapshot.ResourceVersion, now.ResourceVersion)
			expect.Equal(t, "writers (managedFields) of Secret "+r.Namespace+"/"+r.SecretName(), managers(snapshot), managers(now))
			return ctx
		})).
		Teardown(func(ctx context.Context, _ *testing.T, _ *envconf.Config) context.Context {
			if w != nil {
				w.Stop()
			}
			return ctx
		}).
		Feature()
}

// describeWrite names a watch event on the Secret and who made it.
func describeWrite(ev watch.Event) string {
	s, ok := ev.Object.(*corev1.Secret)
	if !ok {
		return fmt.Sprintf("%s %v", ev.Type, ev.Object)
	}
	return fmt.Sprintf("%s at resourceVersion %s by %s", ev.Type, s.ResourceVersion, managers(s))
}

// managers lists a Secret's managedFields entries: who wrote it, how and when.
func managers(s *corev1.Secret) string {
	var out []string
	for _, m := range s.ManagedFields {
		at := ""
		if m.Time != nil {
			at = " at " + m.Time.UTC().Format(time.RFC3339)
		}
		out = append(out, fmt.Sprintf("%s (%s%s)", m.Manager, m.Operation, at))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// olmMountServed is C10: a certificate mounted the way OLM mounts it — tls.cert and tls.key
// instead of a kubernetes.io/tls Secret's tls.crt — is found and served. In an external-mode
// suite it switches the release to an OLM-style Secret with a new CA (helm upgrade with the new
// caBundle, then a restart, as OLM's install would), and restores the release afterwards.
func olmMountServed() types.Feature {
	var olm chart.Release
	var switched bool
	return features.New("OLM-style mount: tls.cert/tls.key are served").
		WithLabel(suite.LabelScenario, "C10").
		WithLabel(suite.LabelCertMode, string(chart.External)).
		WithLabel(suite.LabelCertMode, string(chart.OLM)).
		Setup(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			olm = *r
			if r.Mode == chart.OLM {
				return ctx
			}
			sc, err := pki.NewServingCertificate(r.ServiceHost())
			expect.NoError(t, err, "creating an OLM-style serving certificate")
			olm.Mode, olm.Serving = chart.OLM, sc
			pods := operatorPodUIDs(ctx, t, c, r)
			switched = true
			expect.NoError(t, c.Installer().Upgrade(ctx, &olm), "switching %s to an OLM-style Secret", r)
			// The operator picks its certificate files when it starts, as under OLM.
			restartOperator(ctx, t, c, r, pods)
			return ctx
		})).
		Assess("the Secret holds tls.cert and tls.key, not tls.crt", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			s, err := c.Kube().CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{})
			expect.NoError(t, err, "getting Secret %s/%s", r.Namespace, r.SecretName())
			if len(s.Data["tls.cert"]) == 0 || len(s.Data["tls.key"]) == 0 || len(s.Data[corev1.TLSCertKey]) != 0 {
				expect.Fatalf(t, "Secret %s/%s: expected OLM's file names tls.cert and tls.key without tls.crt, saw keys %v", r.Namespace, r.SecretName(), keys(s.Data))
			}
			return ctx
		})).
		Assess("the webhook Service serves the mounted tls.cert", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectServed(ctx, t, c, r, userServing(t, &olm).Leaf)
			expectLogLine(ctx, t, c, r, "naming the served file", "serving certificate loaded", "tls.cert")
			return ctx
		})).
		Assess("every caBundle holds the OLM certificate's CA and admission works", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectCABundles(ctx, t, c, r, userServing(t, &olm).CAPEM)
			expectAdmission(ctx, t, c, r, "with the OLM-style mount")
			return ctx
		})).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			if !switched {
				return ctx
			}
			restored := *r
			pods := operatorPodUIDs(ctx, t, c, r)
			expect.NoError(t, c.Installer().Upgrade(ctx, &restored), "restoring %s", r)
			restartOperator(ctx, t, c, r, pods)
			expectAdmission(ctx, t, c, r, "after restoring "+r.String())
			return ctx
		})).
		Feature()
}
