package doctor

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A webhook setup that is not gauntlet's operator: other names everywhere, a Secret without
// ca.crt, a validating webhook for ConfigMaps in one namespace, served by a plain AdmissionReview
// handler of this test behind the Service's ClusterIP.
const (
	guardClusterIP   = "127.0.101.20"
	guardServicePort = 19445
	guardService     = "guard-webhook"
	guardSecret      = "guard-serving-tls"
	guardConfig      = "guard-validating"
	guardWebhook     = "validate.guard.example.com"
	guardTestNS      = "guard-test"
)

// guardWorld is that setup installed on the test API server.
type guardWorld struct {
	ca     *testCA
	pair   servingPair
	fwd    *forwarder
	doctor *WebhookDoctor
}

// allowAll answers every AdmissionReview with allowed.
func allowAll(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review) // the API server reports a broken answer itself
}

func newGuardWorld(t *testing.T) *guardWorld {
	g := &guardWorld{ca: newCA(t, "guard-ca")}
	g.pair = g.ca.validFor(t, guardService+"."+guardNS+".svc")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(allowAll))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{g.pair.tls}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	g.fwd = &forwarder{addr: net.JoinHostPort(guardClusterIP, strconv.Itoa(guardServicePort)), backend: srv.Listener.Addr().String(), conns: map[net.Conn]struct{}{}}
	t.Cleanup(g.fwd.stop)
	// The configuration must not outlive the test: its webhook would fail every later
	// ConfigMap create in its namespace.
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: guardConfig}})
	})
	d, err := NewWebhookDoctor(env.Config, WebhookOptions{Namespace: guardNS, TestNamespace: guardTestNS, DialTimeout: 2 * time.Second})
	require.NoError(t, err)
	g.doctor = d
	return g
}

func (g *guardWorld) objects() []client.Object {
	labels := map[string]string{"app.kubernetes.io/name": "guard"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: guardNS, Name: "guard-controller"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "manager", Image: "guard:test",
						Ports:        []corev1.ContainerPort{{Name: "webhook-https", ContainerPort: 8443}},
						VolumeMounts: []corev1.VolumeMount{{Name: "cert", MountPath: "/certs", ReadOnly: true}}}},
					Volumes: []corev1.Volume{{Name: "cert", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: guardSecret}}}},
				},
			},
		},
		Status: appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: guardNS, Name: guardService},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: guardClusterIP, Selector: labels,
			Ports: []corev1.ServicePort{{Name: "https", Port: guardServicePort, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("webhook-https")}}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: guardNS, Name: guardService + "-x1", Labels: map[string]string{discoveryv1.LabelServiceName: guardService}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](8443), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: guardNS, Name: "guard-controller-5c9d-abcde"}}},
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: guardNS, Name: guardSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": g.pair.certPEM, "tls.key": g.pair.keyPEM},
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: guardConfig},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: guardWebhook,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service:  &admissionregistrationv1.ServiceReference{Namespace: guardNS, Name: guardService, Path: ptr.To("/validate"), Port: ptr.To[int32](guardServicePort)},
				CABundle: g.ca.pem,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": guardTestNS}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	return []client.Object{namespaceObject(guardNS), namespaceObject(guardTestNS), deploy, svc, slice, secret, vwc}
}

// runUntil runs the doctor until done accepts the report, for at most 30s (the API server
// sees configuration changes through informers), and returns the last report.
func (g *guardWorld) runUntil(t *testing.T, done func(Report) bool) Report {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		report, err := g.doctor.Run(context.Background())
		require.NoError(t, err)
		if done(report) || time.Now().After(deadline) {
			return report
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (g *guardWorld) reset(t *testing.T) {
	t.Helper()
	g.fwd.start(t)
	for _, o := range g.objects() {
		apply(context.Background(), t, env.Client, o)
	}
	g.fwd.dropConnections()
	report := g.runUntil(t, Report.Healthy)
	require.True(t, report.Healthy(), "the healthy setup does not pass the webhook doctor:\n%s", text(report))
}

// TestWebhookDoctorAgainstAPIServer runs the doctor for any operator against a webhook setup
// named nothing like gauntlet's: names found from the namespace alone, every check passing,
// then one fault at a time named as the one root cause.
func TestWebhookDoctorAgainstAPIServer(t *testing.T) {
	g := newGuardWorld(t)

	t.Run("healthy setup: every check passes", func(t *testing.T) {
		g.reset(t)
		report, err := g.doctor.Run(context.Background())
		require.NoError(t, err)
		t.Logf("healthy setup:\n%s", text(report))
		require.True(t, report.Healthy(), text(report))
		require.Len(t, report, len(webhookChecks()))
		_, secret := requireResult(t, report, CheckSecret, []string{"no ca.crt"})
		assert.NotEmpty(t, secret)
		res, _ := report.Find(CheckSecret)
		assert.Contains(t, res.Title, "Secret policy-system/guard-serving-tls", "the Secret the serving container mounts")
		requireResult(t, report, CheckConfigurations, []string{"ValidatingWebhookConfiguration guard-validating: webhook validate.guard.example.com"})
		requireResult(t, report, CheckServingCertificate, []string{guardClusterIP + ":" + strconv.Itoa(guardServicePort) + " (ClusterIP of Service policy-system/guard-webhook): handshake verified"})
		requireResult(t, report, CheckDryRun, []string{"webhook validate.guard.example.com: dry-run create of a ConfigMap in namespace guard-test: admitted"})
	})

	t.Run("T3 caBundle emptied", func(t *testing.T) {
		g.reset(t)
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Name: guardConfig}, vwc))
		vwc.Webhooks[0].ClientConfig.CABundle = nil
		require.NoError(t, env.Client.Update(context.Background(), vwc))
		g.fwd.dropConnections()
		report := g.runUntil(t, func(r Report) bool {
			dry, _ := r.Find(CheckDryRun)
			return dry.Status == StatusConsequence
		})
		t.Logf("caBundle emptied:\n%s", text(report))
		requireOneRoot(t, report, CheckCABundle, "T3", []string{"caBundle is empty in webhook validate.guard.example.com"}, []string{"cert-manager.io/inject-ca-from"})
		served, _ := report.Find(CheckServingCertificate)
		assert.Equal(t, StatusSkipped, served.Status)
		dry, _ := report.Find(CheckDryRun)
		assert.Equal(t, "T3", dry.Scenario, "the API server's own failed call says unknown authority")
		assert.Equal(t, []string{CheckCABundle}, dry.DependsOn)
	})

	t.Run("T11 Secret deleted", func(t *testing.T) {
		g.reset(t)
		require.NoError(t, env.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: guardNS, Name: guardSecret}}))
		report, err := g.doctor.Run(context.Background())
		require.NoError(t, err)
		t.Logf("Secret deleted:\n%s", text(report))
		root := requireOneRoot(t, report, CheckSecret, "T11", []string{"Secret policy-system/guard-serving-tls not found"},
			[]string{"kubectl -n policy-system rollout restart deployment/guard-controller"})
		assert.NotContains(t, root.Fix, "helm upgrade dynamo", "no fix of gauntlet's chart for another operator")
		for _, id := range []string{CheckServingCertificate, CheckDryRun} {
			res, _ := report.Find(id)
			assert.Equal(t, StatusPass, res.Status, "%s: the server keeps serving the certificate it loaded", id)
		}
		for _, res := range report {
			assert.NotContains(t, res.Fix, "dynamo", "%s's fix names gauntlet's operator: %s", res.ID, res.Fix)
		}
	})
}
