package testbed

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	certutil "k8s.io/client-go/util/cert"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
)

// chartWebhook is the webhook named name of the bench release's rendered chart.
func chartWebhook(t *testing.T, name string) admissionregistrationv1.ValidatingWebhook {
	t.Helper()
	r := chart.Release{Mode: chart.Automatic, Values: benchValues(nil)}
	vals, err := r.ChartValues()
	require.NoError(t, err)
	objs, err := chart.Render(chart.DefaultReleaseName, chart.DefaultNamespace, vals)
	require.NoError(t, err)
	for _, o := range objs {
		if o.GetKind() != "ValidatingWebhookConfiguration" && o.GetKind() != "MutatingWebhookConfiguration" {
			continue
		}
		hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
		require.NoError(t, err)
		for _, h := range hooks {
			m := h.(map[string]any)
			if m["name"] != name {
				continue
			}
			// The fields compared below are the same in both kinds.
			var hook admissionregistrationv1.ValidatingWebhook
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(m, &hook))
			return hook
		}
	}
	t.Fatalf("the rendered chart has no webhook %s", name)
	return admissionregistrationv1.ValidatingWebhook{}
}

func TestFloorWebhooksMatchWhatTheChartsDynamoGraphDeploymentWebhooksMatch(t *testing.T) {
	validating, mutating := floorWebhooks([]byte("ca"), dynamo.GraphDeployments, plainFloor, "")
	require.Len(t, validating.Webhooks, 1)
	require.Len(t, mutating.Webhooks, 1)
	v, m := validating.Webhooks[0], mutating.Webhooks[0]
	for _, c := range []struct {
		chart string
		floor admissionregistrationv1.ValidatingWebhook
	}{
		{dynamo.GraphDeploymentValidatingWebhook, v},
		{dynamo.GraphDeploymentMutatingWebhook, admissionregistrationv1.ValidatingWebhook{
			Rules: m.Rules, MatchPolicy: m.MatchPolicy, SideEffects: m.SideEffects, FailurePolicy: m.FailurePolicy,
			TimeoutSeconds: m.TimeoutSeconds, AdmissionReviewVersions: m.AdmissionReviewVersions,
		}},
	} {
		op := chartWebhook(t, c.chart)
		assert.Equal(t, op.Rules, c.floor.Rules, c.chart)
		assert.Equal(t, *op.MatchPolicy, *c.floor.MatchPolicy, c.chart)
		assert.Equal(t, *op.SideEffects, *c.floor.SideEffects, c.chart)
		assert.Equal(t, *op.FailurePolicy, *c.floor.FailurePolicy, c.chart)
		assert.Equal(t, *op.TimeoutSeconds, *c.floor.TimeoutSeconds, c.chart)
		assert.Equal(t, op.AdmissionReviewVersions, c.floor.AdmissionReviewVersions, c.chart)
	}
}

// TestOnlyTheFloorSelectsTheFloorNamespace: the floor's webhooks select
// FloorNamespace and neither bench namespace; the bench release's webhooks
// select the webhook namespace and not FloorNamespace.
func TestOnlyTheFloorSelectsTheFloorNamespace(t *testing.T) {
	nsLabels := map[string]labels.Set{WebhookNamespace: {}, ControlNamespace: {ControlLabel: "true"}}
	for _, ns := range floorNamespaces(floorRoutes(DynamoFloor())) {
		nsLabels[ns.Name] = ns.Labels
	}
	selects := func(sel *metav1.LabelSelector, ns string) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		require.NoError(t, err)
		return s.Matches(nsLabels[ns])
	}

	validating, mutating := floorWebhooks(nil, dynamo.GraphDeployments, plainFloor, "")
	for _, sel := range []*metav1.LabelSelector{validating.Webhooks[0].NamespaceSelector, mutating.Webhooks[0].NamespaceSelector} {
		assert.True(t, selects(sel, FloorNamespace))
		assert.False(t, selects(sel, WebhookNamespace))
		assert.False(t, selects(sel, ControlNamespace))
		assert.False(t, selects(sel, floorName))
	}
	for _, name := range []string{dynamo.GraphDeploymentValidatingWebhook, dynamo.GraphDeploymentMutatingWebhook} {
		sel := chartWebhook(t, name).NamespaceSelector
		assert.True(t, selects(sel, WebhookNamespace), name)
		assert.False(t, selects(sel, FloorNamespace), name)
	}
}

func TestFloorWebhooksReachThePodThroughTheService(t *testing.T) {
	d, svc := floorDeployment(""), floorService()
	pod := d.Spec.Template
	assert.Equal(t, labels.Set(svc.Spec.Selector), labels.Set(pod.Labels))
	require.Len(t, pod.Spec.Containers, 1)
	c := pod.Spec.Containers[0]
	assert.Equal(t, FloorImage, c.Image)

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(443), svc.Spec.Ports[0].Port)
	assert.Equal(t, int32(floorWebhookPort), ports[svc.Spec.Ports[0].TargetPort.StrVal], "the Service's target port")
	assert.Equal(t, int32(floorProbePort), ports[c.ReadinessProbe.HTTPGet.Port.StrVal], "the readiness probe's port")
	assert.Equal(t, "/healthz", c.ReadinessProbe.HTTPGet.Path)
	assert.Subset(t, c.Args, []string{"--port=9443", "--probe-port=8081", "--cert-dir=/tls"})

	require.Len(t, c.VolumeMounts, 1)
	assert.Equal(t, corev1.VolumeMount{Name: "tls", MountPath: "/tls", ReadOnly: true}, c.VolumeMounts[0])
	require.Len(t, pod.Spec.Volumes, 1)
	assert.Equal(t, floorSecret, pod.Spec.Volumes[0].Secret.SecretName)

	validating, mutating := floorWebhooks([]byte("ca"), dynamo.GraphDeployments, plainFloor, "")
	for _, cc := range []admissionregistrationv1.WebhookClientConfig{validating.Webhooks[0].ClientConfig, mutating.Webhooks[0].ClientConfig} {
		require.NotNil(t, cc.Service)
		assert.Equal(t, svc.Namespace, cc.Service.Namespace)
		assert.Equal(t, svc.Name, cc.Service.Name)
		assert.Equal(t, svc.Spec.Ports[0].Port, *cc.Service.Port)
		assert.Equal(t, []byte("ca"), cc.CABundle)
	}
	assert.Equal(t, "/validate", *validating.Webhooks[0].ClientConfig.Service.Path)
	assert.Equal(t, "/mutate", *mutating.Webhooks[0].ClientConfig.Service.Path)
}

func TestFloorSecretCarriesACertificateForTheServiceHost(t *testing.T) {
	kube := fake.NewClientset()
	caPEM, err := ensureFloorSecret(t.Context(), kube)
	require.NoError(t, err)
	s, err := kube.CoreV1().Secrets(floorName).Get(t.Context(), floorSecret, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.SecretTypeTLS, s.Type)
	assert.Equal(t, caPEM, s.Data["ca.crt"])
	_, err = tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	require.NoError(t, err, "tls.crt and tls.key must be a pair")

	leaf, err := certutil.ParseCertsPEM(s.Data[corev1.TLSCertKey])
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	_, err = leaf[0].Verify(x509.VerifyOptions{DNSName: "gauntlet-floor.gauntlet-floor.svc", Roots: roots})
	assert.NoError(t, err, "the API server dials the Service's host and trusts the webhooks' caBundle")
}

func TestAnExistingFloorSecretKeepsItsCA(t *testing.T) {
	kube := fake.NewClientset()
	first, err := ensureFloorSecret(t.Context(), kube)
	require.NoError(t, err)
	second, err := ensureFloorSecret(t.Context(), kube)
	require.NoError(t, err)
	assert.Equal(t, first, second, "a second install must trust the certificate the running floor serves")
}

func TestCreateOrReplaceReplacesAnExistingWebhookConfiguration(t *testing.T) {
	kube := fake.NewClientset()
	c := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	old, _ := floorWebhooks([]byte("old CA"), dynamo.GraphDeployments, plainFloor, "")
	require.NoError(t, createOrReplace(t.Context(), "ValidatingWebhookConfiguration", old, c))
	current, _ := floorWebhooks([]byte("new CA"), dynamo.GraphDeployments, plainFloor, "")
	require.NoError(t, createOrReplace(t.Context(), "ValidatingWebhookConfiguration", current, c))
	got, err := c.Get(t.Context(), floorWebhookConfig, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []byte("new CA"), got.Webhooks[0].ClientConfig.CABundle)
}

// TestThePatchingFloorReturnsTheOperatorsPatchInANamespaceOfItsOwn: the patching floor's
// webhooks select FloorPatchingNamespace alone, call the same pod, the mutating one on the path
// the floor answers with its patch, and the patch adds the annotation map the operator adds to an
// object without annotations (the bench's DynamoGraphDeployment).
func TestThePatchingFloorReturnsTheOperatorsPatchInANamespaceOfItsOwn(t *testing.T) {
	routes := floorRoutes(DynamoFloor())
	require.Equal(t, []floorRoute{plainFloor, patchingFloor, directFloor}, routes)
	nsLabels := map[string]labels.Set{}
	for _, ns := range floorNamespaces(routes) {
		nsLabels[ns.Name] = ns.Labels
	}
	validating, mutating := floorWebhooks([]byte("ca"), dynamo.GraphDeployments, patchingFloor, "")
	for _, sel := range []*metav1.LabelSelector{validating.Webhooks[0].NamespaceSelector, mutating.Webhooks[0].NamespaceSelector} {
		s, err := metav1.LabelSelectorAsSelector(sel)
		require.NoError(t, err)
		assert.True(t, s.Matches(nsLabels[FloorPatchingNamespace]))
		assert.False(t, s.Matches(nsLabels[FloorNamespace]))
	}
	assert.Equal(t, "true", nsLabels[FloorPatchingNamespace][ControlLabel], "the bench release's webhooks skip it")
	assert.Equal(t, "/mutate-patching", *mutating.Webhooks[0].ClientConfig.Service.Path)
	assert.Equal(t, "/validate", *validating.Webhooks[0].ClientConfig.Service.Path)
	assert.Equal(t, "mutate.floor-patching.bench.gauntlet.dev", mutating.Webhooks[0].Name)
	plainV, _ := floorWebhooks([]byte("ca"), dynamo.GraphDeployments, plainFloor, "")
	assert.NotEqual(t, plainV.Name, validating.Name, "a configuration of its own")

	patch, err := floorPatch(DynamoFloor())
	require.NoError(t, err)
	assert.JSONEq(t, `[{"op":"add","path":"/metadata/annotations","value":{"nvidia.com/dynamo-operator-origin-version":"gauntlet-floor"}}]`, patch)
	assert.Contains(t, floorDeployment(patch).Spec.Template.Spec.Containers[0].Args, "--patch="+patch)

	annotated := DynamoFloor()
	annotated.Admitted = func(ns, name string) *unstructured.Unstructured {
		o := dynamo.GraphDeployment(ns, name)
		o.SetAnnotations(map[string]string{"team": "a"})
		return o
	}
	patch, err = floorPatch(annotated)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"op":"add","path":"/metadata/annotations/nvidia.com~1dynamo-operator-origin-version","value":"gauntlet-floor"}]`, patch)

	noStamp := DynamoFloor()
	noStamp.Stamp, noStamp.Bypass = "", false
	assert.Equal(t, []floorRoute{plainFloor}, floorRoutes(noStamp), "nothing to patch: no patching floor")
}

func TestWrongStampSaysWhoseWebhookRan(t *testing.T) {
	objs := DynamoFloor()
	key := dynamo.OriginVersionAnnotation
	assert.Empty(t, wrongStamp(nil, objs, plainFloor))
	assert.Empty(t, wrongStamp(map[string]string{key: FloorStampValue}, objs, patchingFloor))
	assert.Contains(t, wrongStamp(nil, objs, patchingFloor), "the patching floor's mutating webhook did not patch it")
	assert.Contains(t, wrongStamp(map[string]string{key: "v0.3.0"}, objs, patchingFloor), `="v0.3.0": the operator's mutating webhook selects the namespace too`)
	assert.Contains(t, wrongStamp(map[string]string{key: FloorStampValue}, objs, plainFloor), "the patching floor's mutating webhook selects namespace bench-floor too")
}

// TestTheDirectRouteCallsThePodAtItsAddress: the direct route's webhooks call the floor pod at
// its address (url:, the same paths, the same CA), bypassing the Service, in a namespace of their
// own; the floor serves a certificate for that address, issued from the CA its Secret holds.
func TestTheDirectRouteCallsThePodAtItsAddress(t *testing.T) {
	validating, mutating := floorWebhooks([]byte("ca"), dynamo.GraphDeployments, directFloor, "10.244.44.7")
	for path, cc := range map[string]admissionregistrationv1.WebhookClientConfig{
		"/validate": validating.Webhooks[0].ClientConfig, "/mutate": mutating.Webhooks[0].ClientConfig,
	} {
		assert.Nil(t, cc.Service, path)
		require.NotNil(t, cc.URL, path)
		assert.Equal(t, "https://10.244.44.7:9443"+path, *cc.URL)
		assert.Equal(t, []byte("ca"), cc.CABundle)
	}
	assert.Equal(t, map[string]string{FloorDirectLabel: "true"}, validating.Webhooks[0].NamespaceSelector.MatchLabels)
	assert.Equal(t, "gauntlet-bench-floor-direct", validating.Name)

	c := floorDeployment("").Spec.Template.Spec.Containers[0]
	assert.Contains(t, c.Args, "--ip-san=$(POD_IP)")
	require.Len(t, c.Env, 1)
	assert.Equal(t, "status.podIP", c.Env[0].ValueFrom.FieldRef.FieldPath)

	kube := fake.NewClientset()
	_, err := ensureFloorSecret(t.Context(), kube)
	require.NoError(t, err)
	s, err := kube.CoreV1().Secrets(floorName).Get(t.Context(), floorSecret, metav1.GetOptions{})
	require.NoError(t, err)
	_, err = pki.LoadCertificateAuthority(s.Data["ca.crt"], s.Data[floorCAKey])
	require.NoError(t, err, "the floor can issue from the CA its Secret holds")
}
