package doctor

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gauntlet-dev/gauntlet/operator/internal/scheme"
)

const guardNS = "policy-system"

// guardSession is a session of any operator's doctor over controller-runtime's fake client,
// before resolve.
func guardSession(t *testing.T, objs ...client.Object) *session {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	d := &Doctor{opts: Options{Namespace: guardNS, TestNamespace: DefaultTestNamespace}.withDefaults(), cfg: &rest.Config{Host: "https://fake.invalid"}, client: c}
	return d.newSession(facts{mode: modeUnknown, fix: fixes{namespace: guardNS}})
}

func vwcCalling(name, namespace, service string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "v." + name + ".example.com", SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: service}},
		}},
	}
}

func mwcCalling(name, namespace, service string) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "m." + name + ".example.com", SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: service}},
		}},
	}
}

func crdConvertingBy(name, namespace, service string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Conversion: &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: &apiextensionsv1.WebhookClientConfig{
				Service: &apiextensionsv1.ServiceReference{Namespace: namespace, Name: service},
			}},
		}},
	}
}

func TestServiceDiscovery(t *testing.T) {
	cases := []struct {
		name    string
		objs    []client.Object
		service string
		err     []string
	}{
		{
			name: "found: a configuration and a CRD conversion call the same Service; other namespaces do not count",
			objs: []client.Object{vwcCalling("guard", guardNS, "guard-webhook"), crdConvertingBy("policies.example.com", guardNS, "guard-webhook"),
				mwcCalling("elsewhere", "other-system", "other-webhook")},
			service: "guard-webhook",
		},
		{
			name:    "found: only a CRD conversion calls it",
			objs:    []client.Object{crdConvertingBy("policies.example.com", guardNS, "convert")},
			service: "convert",
		},
		{
			name: "ambiguous: two Services are called",
			objs: []client.Object{vwcCalling("guard", guardNS, "guard-webhook"), mwcCalling("mutator", guardNS, "mutator-webhook")},
			err: []string{"webhooks call 2 Services in namespace policy-system",
				"guard-webhook (called by webhook v.guard.example.com of ValidatingWebhookConfiguration guard)",
				"mutator-webhook (called by webhook m.mutator.example.com of MutatingWebhookConfiguration mutator)",
				"pass --service NAME"},
		},
		{
			name: "none: nothing calls a Service in the namespace",
			objs: []client.Object{vwcCalling("elsewhere", "other-system", "other-webhook")},
			err:  []string{"no ValidatingWebhookConfiguration, MutatingWebhookConfiguration or CRD conversion webhook calls a Service in namespace policy-system", "--service NAME"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := guardSession(t, tc.objs...)
			err := s.resolve(context.Background(), WebhookOptions{Namespace: guardNS})
			if tc.err != nil {
				require.Error(t, err)
				for _, want := range tc.err {
					assert.Contains(t, err.Error(), want)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.service, s.serviceName)
		})
	}

	t.Run("--service wins over discovery", func(t *testing.T) {
		s := guardSession(t, vwcCalling("guard", guardNS, "guard-webhook"), mwcCalling("mutator", guardNS, "mutator-webhook"))
		require.NoError(t, s.resolve(context.Background(), WebhookOptions{Namespace: guardNS, Service: "mutator-webhook"}))
		assert.Equal(t, "mutator-webhook", s.serviceName)
	})
}

// guardServiceObject and guardDeployment: a webhook Service whose targetPort names the port of the
// Deployment's container "manager"; a sidecar mounts a Secret of its own.
func guardServiceObject() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: guardNS, Name: "guard-webhook"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "guard"},
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromString("webhook")}}},
	}
}

func guardDeployment(managerMounts ...corev1.VolumeMount) *appsv1.Deployment {
	secretVolume := func(name, secret string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: guardNS, Name: "guard-controller"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guard"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "guard", "pod-template-hash": "abc"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{
						{Name: "proxy", Image: "proxy", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8443}},
							VolumeMounts: []corev1.VolumeMount{{Name: "proxy-tls", MountPath: "/tls"}}},
						{Name: "manager", Image: "guard", Ports: []corev1.ContainerPort{{Name: "webhook", ContainerPort: 9443}},
							VolumeMounts: managerMounts},
					},
					Volumes: []corev1.Volume{
						secretVolume("proxy-tls", "proxy-tls"),
						secretVolume("cert", "guard-serving-tls"),
						{Name: "bundle", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
							{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "guard-extra-tls"}}},
						}}}},
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "guard-config"}}}},
					},
				},
			},
		},
	}
}

func TestSecretDiscovery(t *testing.T) {
	mount := func(name string) corev1.VolumeMount { return corev1.VolumeMount{Name: name, MountPath: "/" + name} }
	cases := []struct {
		name   string
		deploy *appsv1.Deployment
		secret string
		skip   []string
	}{
		{name: "mounted: the serving container's one Secret, not the sidecar's", deploy: guardDeployment(mount("cert"), mount("config")), secret: "guard-serving-tls"},
		{name: "none: the serving container mounts only a ConfigMap", deploy: guardDeployment(mount("config")),
			skip: []string{"container manager of Deployment policy-system/guard-controller, which serves the webhook, mounts no Secret: pass --secret"}},
		{name: "several: a Secret volume and a projected one", deploy: guardDeployment(mount("cert"), mount("bundle")),
			skip: []string{"mounts Secrets guard-extra-tls, guard-serving-tls: pass --secret"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := guardSession(t, vwcCalling("guard", guardNS, "guard-webhook"), guardServiceObject(), tc.deploy)
			require.NoError(t, s.resolve(context.Background(), WebhookOptions{Namespace: guardNS}))
			assert.Equal(t, "guard-controller", s.deploymentName, "the Deployment the Service's selector matches")
			assert.Equal(t, tc.secret, s.secretName)
			for _, want := range tc.skip {
				assert.Contains(t, s.noSecret, want)
			}
			report := s.runChecks(context.Background(), checksOf(t, webhookChecks(), CheckSecret))
			res, _ := report.Find(CheckSecret)
			if tc.skip != nil {
				assert.Equal(t, StatusSkipped, res.Status)
				assert.Contains(t, res.Cause, "pass --secret")
				assert.True(t, report.Healthy(), "a Secret the doctor cannot name is nothing to examine, not a fault")
			} else {
				assert.Equal(t, StatusFail, res.Status, "the fake cluster has no Secret %s", tc.secret)
				assert.Equal(t, "T11", res.Scenario)
			}
		})
	}

	t.Run("--secret wins over the mounts", func(t *testing.T) {
		s := guardSession(t, vwcCalling("guard", guardNS, "guard-webhook"), guardServiceObject(), guardDeployment(mount("cert"), mount("bundle")))
		require.NoError(t, s.resolve(context.Background(), WebhookOptions{Namespace: guardNS, Secret: "chosen"}))
		assert.Equal(t, "chosen", s.secretName)
		assert.Empty(t, s.noSecret)
	})

	t.Run("no Deployment behind the Service", func(t *testing.T) {
		s := guardSession(t, vwcCalling("guard", guardNS, "guard-webhook"), guardServiceObject())
		require.NoError(t, s.resolve(context.Background(), WebhookOptions{Namespace: guardNS}))
		assert.Empty(t, s.secretName)
		assert.Contains(t, s.noSecret, "no Deployment in namespace policy-system has Pods that Service policy-system/guard-webhook's selector app=guard matches: pass --secret")
	})
}

// TestWebhookChecklist: any operator gets the release's checks but gauntlet's extras, with
// the same IDs, in the same order, none of them upstream of another.
func TestWebhookChecklist(t *testing.T) {
	var ids []string
	for _, c := range webhookChecks() {
		ids = append(ids, c.id)
		for _, up := range append(append([]string{}, c.needs...), c.after...) {
			assert.NotContains(t, releaseExtras, up, "%s still depends on a release's extra", c.id)
		}
	}
	assert.Equal(t, []string{CheckAPIServer, CheckSecret, CheckConfigurations, CheckCABundle, CheckNamespaceSelector,
		CheckService, CheckEndpoints, CheckServingCertificate, CheckDryRun}, ids)
}

// TestFixesForAnyOperator: the failed-call classification names the same scenarios for any
// operator, with fixes that name none of gauntlet's chart values or operator flags.
func TestFixesForAnyOperator(t *testing.T) {
	const post = `Internal error occurred: failed calling webhook "v.guard.example.com": failed to call webhook: Post "https://guard-webhook.policy-system.svc:443/validate?timeout=10s": `
	s := guardSession(t, vwcCalling("guard", guardNS, "guard-webhook"), guardServiceObject(), guardDeployment())
	require.NoError(t, s.resolve(context.Background(), WebhookOptions{Namespace: guardNS}))
	for text, scenario := range map[string]string{
		post + `context deadline exceeded`:                                                        "T9",
		post + `service "guard-webhook" not found`:                                                "T8",
		post + `dial tcp 10.96.0.7:443: connect: connection refused`:                              "T6",
		post + `tls: failed to verify certificate: x509: certificate signed by unknown authority`: "T3",
	} {
		c := s.callFailure("the dry-run create", errors.New(text))
		assert.Equal(t, scenario, c.scenario, text)
		for _, gauntlets := range []string{"dynamo", "--webhook-latency-injection", "webhook.timeoutSeconds", "app.kubernetes.io/instance"} {
			assert.NotContains(t, c.fix, gauntlets, "%s fix", scenario)
		}
	}
}

// TestNamedConfigurationMissing: with the configurations the installation makes named, one
// deleted beside another that still calls the Service is T1; without the names it is unseen.
func TestNamedConfigurationMissing(t *testing.T) {
	objs := []client.Object{mwcCalling("guard-mutating", guardNS, "guard-webhook"), guardServiceObject(), guardDeployment()}
	for _, tc := range []struct {
		name  string
		named []string
		pass  bool
	}{
		{name: "named: the deleted validating configuration is T1", named: []string{"guard-validating", "guard-mutating"}},
		{name: "not named: only what exists is seen", pass: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := guardSession(t, objs...)
			require.NoError(t, s.resolve(context.Background(), WebhookOptions{Namespace: guardNS, Configurations: tc.named}))
			o := checkConfigurations(context.Background(), s)
			if tc.pass {
				assert.True(t, o.ok, o.cause)
				return
			}
			assert.False(t, o.ok)
			assert.Equal(t, "T1", o.scenario)
			assert.Contains(t, o.cause, "no ValidatingWebhookConfiguration or MutatingWebhookConfiguration named guard-validating,")
			assert.NotContains(t, o.cause, "guard-mutating,")
		})
	}
}
