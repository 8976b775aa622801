package doctor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// staticChecks are the checks that only read objects, so the fake client serves them.
var staticChecks = []string{CheckDeployment, CheckSecret, CheckConfigurations, CheckCABundle, CheckNamespaceSelector, CheckService, CheckEndpoints}

func setMode(mode string) func(*appsv1.Deployment) bool {
	return func(d *appsv1.Deployment) bool {
		args := d.Spec.Template.Spec.Containers[0].Args
		for i, a := range args {
			if strings.HasPrefix(a, "--webhook-cert-mode=") {
				args[i] = "--webhook-cert-mode=" + mode
			}
		}
		return true
	}
}

// editWebhooks applies fn to every webhook of both configurations.
func editWebhooks(t *testing.T, r *release, objs []client.Object, fn func(webhookFields)) []client.Object {
	objs = edit(t, objs, r.validating(), func(c *admissionregistrationv1.ValidatingWebhookConfiguration) bool {
		forEachWebhook(fn, c)
		return true
	})
	return edit(t, objs, r.mutating(), func(c *admissionregistrationv1.MutatingWebhookConfiguration) bool {
		forEachWebhook(fn, c)
		return true
	})
}

func setSecretData(key string, value []byte) func(*corev1.Secret) bool {
	return func(s *corev1.Secret) bool {
		if value == nil {
			delete(s.Data, key)
		} else {
			s.Data[key] = value
		}
		return true
	}
}

func drop[T client.Object](T) bool { return false }

func TestStaticChecks(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name   string
		mutate func(t *testing.T, r *release, objs []client.Object) []client.Object
		// root is the one root cause (empty: healthy); scenario its T-ID.
		root, scenario string
		cause, fix     []string
		// status pins the status of other checks.
		status map[string]Status
	}{
		{name: "healthy release: every check passes"},
		{
			name: "operator Deployment missing (wrong --release/--namespace)",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.deployment(), drop[*appsv1.Deployment])
			},
			root: CheckDeployment, cause: []string{"Deployment dynamo-system/dynamo-operator not found", `release "dynamo" is not installed`},
			fix: []string{"helm upgrade dynamo charts/dynamo-operator --namespace dynamo-system --reuse-values --install"},
		},
		{
			name: "T1 ValidatingWebhookConfiguration deleted",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.validating(), drop[*admissionregistrationv1.ValidatingWebhookConfiguration])
			},
			root: CheckConfigurations, scenario: "T1",
			cause:  []string{"T1 ValidatingWebhookConfiguration deleted: ValidatingWebhookConfiguration dynamo-validating not found", "invalid object accepted, no validation log"},
			fix:    []string{"helm upgrade restores it", "helm upgrade dynamo charts/dynamo-operator --namespace dynamo-system --reuse-values"},
			status: map[string]Status{CheckCABundle: StatusPass, CheckNamespaceSelector: StatusPass, CheckService: StatusPass},
		},
		{
			name: "MutatingWebhookConfiguration deleted",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.mutating(), drop[*admissionregistrationv1.MutatingWebhookConfiguration])
			},
			root: CheckConfigurations, cause: []string{"MutatingWebhookConfiguration dynamo-mutating not found"},
		},
		{
			name: "T2 namespaceSelector does not match the test namespace",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return editWebhooks(t, r, objs, func(h webhookFields) {
					*h.namespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"dynamo.nvidia.com/webhooks": "enabled"}}
				})
			},
			root: CheckNamespaceSelector, scenario: "T2",
			cause: []string{"T2 namespaceSelector does not match the namespace: the namespaceSelector of all 6 webhooks does not match namespace team-x"},
			fix:   []string{"kubectl label namespace team-x dynamo.nvidia.com/webhooks=enabled --overwrite"},
		},
		{
			name: "T2 only the DynamoGraphDeployment validating webhook misses the namespace",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.validating(), func(c *admissionregistrationv1.ValidatingWebhookConfiguration) bool {
					c.Webhooks[1].NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"team-x"}}}}
					return true
				})
			},
			root: CheckNamespaceSelector, scenario: "T2",
			cause: []string{"the namespaceSelector of webhook vdynamographdeployment.nvidia.com does not match namespace team-x"},
			fix:   []string{`helm upgrade dynamo charts/dynamo-operator --namespace dynamo-system --reuse-values --set-json 'webhook.namespaceSelector={}'`},
		},
		{
			name: "T3 caBundle empty",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return editWebhooks(t, r, objs, func(h webhookFields) {
					h.clientConfig.CABundle = nil
				})
			},
			root: CheckCABundle, scenario: "T3",
			cause: []string{"caBundle is empty in all 6 webhooks", "x509: certificate signed by unknown authority"},
			fix:   []string{"kubectl -n dynamo-system rollout restart deployment/dynamo-operator"},
		},
		{
			name: "T3 caBundle from another CA",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				other := newCA(t, "another-ca")
				return editWebhooks(t, r, objs, func(h webhookFields) {
					h.clientConfig.CABundle = other.pem
				})
			},
			root: CheckCABundle, scenario: "T3",
			cause: []string{"is from another CA", "Secret dynamo-system/webhook-server-cert", "x509: certificate signed by unknown authority"},
		},
		{
			name: "T3 caBundle is not PEM",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return editWebhooks(t, r, objs, func(h webhookFields) {
					h.clientConfig.CABundle = []byte("not a certificate")
				})
			},
			root: CheckCABundle, scenario: "T3", cause: []string{"caBundle is not PEM", "does not contain any valid RSA or ECDSA certificates"},
		},
		{
			name: "T3 external mode: the fix is the chart's caBundle value",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				objs = edit(t, objs, r.deployment(), setMode("external"))
				return editWebhooks(t, r, objs, func(h webhookFields) {
					h.clientConfig.CABundle = nil
				})
			},
			root: CheckCABundle, scenario: "T3", fix: []string{`--set webhook.caBundle="$(base64 -w0 ca.crt)"`},
		},
		{
			name: "T4 serving certificate SAN lacks <svc>.<ns>.svc (external mode)",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				wrong := r.ca.validFor(t, "wrong-service.dynamo-system.svc")
				objs = edit(t, objs, r.deployment(), setMode("external"))
				objs = edit(t, objs, "webhook-server-cert", setSecretData("tls.crt", wrong.certPEM))
				return edit(t, objs, "webhook-server-cert", setSecretData("tls.key", wrong.keyPEM))
			},
			root: CheckSecret, scenario: "T4",
			cause: []string{"is valid for wrong-service.dynamo-system.svc, not dynamo-webhook-service.dynamo-system.svc", "x509: certificate is valid for …, not <svc>.<ns>.svc"},
			fix:   []string{"re-issue cert with the right SAN", "kubectl -n dynamo-system create secret generic webhook-server-cert --type=kubernetes.io/tls"},
		},
		{
			name: "T5 serving certificate expired (external mode)",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				old := r.ca.issue(t, []string{r.host()}, now.Add(-3*time.Hour), now.Add(-2*time.Hour))
				objs = edit(t, objs, r.deployment(), setMode("external"))
				objs = edit(t, objs, "webhook-server-cert", setSecretData("tls.crt", old.certPEM))
				return edit(t, objs, "webhook-server-cert", setSecretData("tls.key", old.keyPEM))
			},
			root: CheckSecret, scenario: "T5",
			cause: []string{"T5 serving cert expired", "x509: certificate has expired or is not yet valid"},
			fix:   []string{"re-issue"},
		},
		{
			name: "T11 Secret deleted while running (automatic mode)",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, "webhook-server-cert", drop[*corev1.Secret])
			},
			root: CheckSecret, scenario: "T11",
			cause:  []string{"Secret dynamo-system/webhook-server-cert not found"},
			fix:    []string{"kubectl -n dynamo-system rollout restart deployment/dynamo-operator && kubectl -n dynamo-system rollout status deployment/dynamo-operator"},
			status: map[string]Status{CheckCABundle: StatusPass},
		},
		{
			name: "Secret deleted in cert-manager mode: cert-manager has not issued it",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				objs = edit(t, objs, r.deployment(), setMode("cert-manager"))
				return edit(t, objs, "webhook-server-cert", drop[*corev1.Secret])
			},
			root: CheckSecret, cause: []string{"cert-manager has not issued Certificate dynamo-serving-cert"},
			fix: []string{"kubectl -n dynamo-system describe certificate dynamo-serving-cert"},
		},
		{
			name: "Secret without ca.crt",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, "webhook-server-cert", setSecretData("ca.crt", nil))
			},
			root: CheckSecret, cause: []string{"lacks ca.crt"},
		},
		{
			name: "tls.key does not belong to tls.crt",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				other := r.ca.validFor(t, r.host())
				return edit(t, objs, "webhook-server-cert", setSecretData("tls.key", other.keyPEM))
			},
			root: CheckSecret, cause: []string{"tls.crt and tls.key are not a usable key pair"},
		},
		{
			name: "T8 webhook Service deleted",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.service(), drop[*corev1.Service])
			},
			root: CheckService, scenario: "T8",
			cause:  []string{"Service dynamo-system/dynamo-webhook-service not found", `service "<name>" not found in the failed-call error`},
			fix:    []string{"restore Service", "helm upgrade dynamo"},
			status: map[string]Status{CheckEndpoints: StatusSkipped},
		},
		{
			name: "webhooks call another Service",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return editWebhooks(t, r, objs, func(h webhookFields) {
					h.clientConfig.Service.Name = "someone-else"
				})
			},
			root:  CheckService,
			cause: []string{"calls Service dynamo-system/someone-else, but the operator serves behind Service dynamo-system/dynamo-webhook-service"},
		},
		{
			name: "Service lacks the port the webhooks call",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.service(), func(s *corev1.Service) bool { s.Spec.Ports[0].Port = 8443; return true })
			},
			root: CheckService, cause: []string{"has no port 443"},
		},
		{
			name: "T6 operator scaled to 0",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				objs = edit(t, objs, r.deployment(), func(d *appsv1.Deployment) bool {
					d.Spec.Replicas = ptr.To[int32](0)
					d.Status = appsv1.DeploymentStatus{}
					return true
				})
				objs = edit(t, objs, r.podName(), drop[*corev1.Pod])
				return edit(t, objs, r.service()+"-abcde", func(s *discoveryv1.EndpointSlice) bool { s.Endpoints = nil; return true })
			},
			root: CheckEndpoints, scenario: "T6",
			cause: []string{"Service dynamo-system/dynamo-webhook-service has no ready endpoints", "0 replicas desired", "connect: connection refused"},
			fix:   []string{"kubectl -n dynamo-system scale deployment/dynamo-operator --replicas=1"},
		},
		{
			name: "T6 operator crashing",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				objs = edit(t, objs, r.podName(), func(p *corev1.Pod) bool {
					p.Status.Conditions[0].Status = corev1.ConditionFalse
					p.Status.ContainerStatuses[0].RestartCount = 4
					p.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 1m20s"}
					return true
				})
				return edit(t, objs, r.service()+"-abcde", func(s *discoveryv1.EndpointSlice) bool {
					s.Endpoints[0].Conditions.Ready = ptr.To(false)
					return true
				})
			},
			root: CheckEndpoints, scenario: "T6",
			fix: []string{"kubectl -n dynamo-system logs deployment/dynamo-operator --previous"},
		},
		{
			name: "T7 operator down with failurePolicy Ignore",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				objs = editWebhooks(t, r, objs, func(h webhookFields) {
					*h.failurePolicy = ptr.To(admissionregistrationv1.Ignore)
				})
				objs = edit(t, objs, r.podName(), drop[*corev1.Pod])
				return edit(t, objs, r.service()+"-abcde", func(s *discoveryv1.EndpointSlice) bool { s.Endpoints = nil; return true })
			},
			root: CheckEndpoints, scenario: "T7",
			cause: []string{"T7 as T6 with failurePolicy: Ignore", "failurePolicy Ignore on webhooks vdynamocomponentdeployment.nvidia.com, vdynamographdeployment.nvidia.com", "object admitted without validation"},
		},
		{
			// Gatekeeper's shape: one validating webhook fails open, another closed. The one
			// that fails closed is refused with T6's message: T6 is what the user meets.
			name: "T6 operator down, one validating webhook Ignore and one Fail",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				objs = edit(t, objs, r.validating(), func(c *admissionregistrationv1.ValidatingWebhookConfiguration) bool {
					c.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
					return true
				})
				objs = edit(t, objs, r.podName(), drop[*corev1.Pod])
				return edit(t, objs, r.service()+"-abcde", func(s *discoveryv1.EndpointSlice) bool { s.Endpoints = nil; return true })
			},
			root: CheckEndpoints, scenario: "T6",
			cause: []string{"T6 operator scaled to 0 / crashed, failurePolicy: Fail", "failurePolicy Ignore on webhook vdynamocomponentdeployment.nvidia.com: what they judge is admitted unjudged", "connect: connection refused"},
		},
		{
			name: "no EndpointSlices published (host-network process node): ready Pods count",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.service()+"-abcde", drop[*discoveryv1.EndpointSlice])
			},
		},
		{
			name: "test namespace does not exist",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.testNamespace, drop[*corev1.Namespace])
			},
			root: CheckNamespaceSelector, cause: []string{"test namespace team-x not found"}, fix: []string{"kubectl create namespace team-x"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRelease(t)
			objs := r.objects(t)
			if tc.mutate != nil {
				objs = tc.mutate(t, r, objs)
			}
			report := runChecks(context.Background(), fakeDoctor(t, r, objs, now), checksByID(t, staticChecks...))
			require.Len(t, report, len(staticChecks))
			if tc.root == "" {
				var b strings.Builder
				require.NoError(t, report.WriteText(&b))
				require.True(t, report.Healthy(), "report:\n%s", b.String())
				return
			}
			requireOneRoot(t, report, tc.root, tc.scenario, tc.cause, tc.fix)
			for id, want := range tc.status {
				got, ok := report.Find(id)
				require.True(t, ok)
				assert.Equal(t, want, got.Status, "status of %s", id)
			}
			for _, res := range report {
				assertNoKeyMaterial(t, res, r.serving.keyPEM)
			}
		})
	}
}

// assertNoKeyMaterial checks that no part of a result quotes a private key.
func assertNoKeyMaterial(t *testing.T, res Result, key []byte) {
	t.Helper()
	all := res.Title + res.Cause + res.Fix + strings.Join(res.Details, "\n")
	assert.NotContains(t, all, "PRIVATE KEY")
	assert.NotContains(t, all, strings.TrimSpace(string(key)))
}

func TestEndpointFallbackWithoutSlices(t *testing.T) {
	r := newRelease(t)
	objs := edit(t, r.objects(t), r.service()+"-abcde", drop[*discoveryv1.EndpointSlice])
	report := runChecks(context.Background(), fakeDoctor(t, r, objs, time.Now()), checksByID(t, CheckDeployment, CheckService, CheckEndpoints))
	res, _ := report.Find(CheckEndpoints)
	require.Equal(t, StatusPass, res.Status)
	assert.Contains(t, strings.Join(res.Details, "\n"), "no EndpointSlices published")
	assert.Contains(t, strings.Join(res.Details, "\n"), "ready endpoint 10.244.0.5:9443 (pod "+r.podName()+")")
}

func TestRestrictedReleaseIsDetected(t *testing.T) {
	r := newRelease(t)
	objs := r.objects(t)
	// A release whose Deployment does not name its objects (an older chart): the doctor finds
	// the restricted variants by name and derives the test namespace from them.
	objs = edit(t, objs, r.deployment(), func(d *appsv1.Deployment) bool {
		d.Spec.Template.Spec.Containers[0].Args = []string{"--webhook-cert-mode=automatic"}
		return true
	})
	objs = edit(t, objs, r.validating(), func(c *admissionregistrationv1.ValidatingWebhookConfiguration) bool {
		c.Name = "dynamo-validating-team-a"
		return true
	})
	objs = edit(t, objs, r.mutating(), func(c *admissionregistrationv1.MutatingWebhookConfiguration) bool {
		c.Name = "dynamo-mutating-team-a"
		return true
	})
	objs = append(objs, namespaceObject("team-a"))
	d := fakeDoctor(t, r, objs, time.Now())
	d.opts.TestNamespace = ""
	report := runChecks(context.Background(), d, checksByID(t, CheckDeployment, CheckConfigurations, CheckNamespaceSelector))
	require.True(t, report.Healthy())
	res, _ := report.Find(CheckConfigurations)
	assert.Equal(t, "ValidatingWebhookConfiguration dynamo-validating-team-a and MutatingWebhookConfiguration dynamo-mutating-team-a exist", res.Title)
	res, _ = report.Find(CheckNamespaceSelector)
	assert.Equal(t, "every webhook's namespaceSelector selects namespace team-a", res.Title)
	dep, _ := report.Find(CheckDeployment)
	assert.Contains(t, dep.Details, "the container's arguments name no webhook objects: using the chart's default names")
}

func TestParseArgs(t *testing.T) {
	got := parseArgs([]string{"--a=1", "--b", "2", "-c", "--d", "--e=", "positional"})
	assert.Equal(t, map[string]string{"a": "1", "b": "2", "c": "true", "d": "true", "e": ""}, got)
}
