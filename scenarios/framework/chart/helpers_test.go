// The chart lives outside this Go module, and `go test` only checks files inside the module
// when it decides whether a cached result is still valid: after editing the chart, run these
// tests with -count=1.

package chart_test

import (
	"encoding/base64"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	helmchart "helm.sh/helm/v3/pkg/chart"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
)

const (
	testRelease   = "dynamo"
	testNamespace = "dynamo-system"
	dgdrCRD       = "dynamographdeploymentrequests.nvidia.com"
)

// The operator's webhook contract (DESIGN.md): every webhook by name, with the path it is served on.
var (
	wantValidatingPaths = map[string]string{
		"vdynamocomponentdeployment.nvidia.com":    "/validate-nvidia-com-v1alpha1-dynamocomponentdeployment",
		"vdynamographdeployment.nvidia.com":        "/validate-nvidia-com-v1alpha1-dynamographdeployment",
		"vdynamomodel.nvidia.com":                  "/validate-nvidia-com-v1alpha1-dynamomodel",
		"vdynamographdeploymentrequest.nvidia.com": "/validate-nvidia-com-v1beta1-dynamographdeploymentrequest",
	}
	wantMutatingPaths = map[string]string{
		"mdynamographdeployment.nvidia.com":        "/mutate-nvidia-com-v1alpha1-dynamographdeployment",
		"mdynamographdeploymentrequest.nvidia.com": "/mutate-nvidia-com-v1beta1-dynamographdeploymentrequest",
	}
)

var loadChartOnce = sync.OnceValues(chart.Load)

func testChart(t *testing.T) *helmchart.Chart {
	t.Helper()
	ch, err := loadChartOnce()
	require.NoError(t, err)
	return ch
}

// values parses a YAML values document, the way a user writes a values file.
func values(t *testing.T, doc string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &vals), "parsing test values %q", doc)
	return vals
}

// objects is one rendering of the chart.
type objects []*unstructured.Unstructured

func render(t *testing.T, namespace, valuesYAML string) objects {
	t.Helper()
	objs, err := chart.RenderChart(testChart(t), testRelease, namespace, values(t, valuesYAML))
	require.NoError(t, err)
	return objs
}

func renderError(t *testing.T, valuesYAML string) error {
	t.Helper()
	_, err := chart.RenderChart(testChart(t), testRelease, testNamespace, values(t, valuesYAML))
	require.Error(t, err, "rendering with values %q should fail", valuesYAML)
	return err
}

func (o objects) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range o {
		if obj.GetKind() == kind {
			out = append(out, obj)
		}
	}
	return out
}

func (o objects) names(kind string) []string {
	var out []string
	for _, obj := range o.ofKind(kind) {
		out = append(out, obj.GetName())
	}
	slices.Sort(out)
	return out
}

func (o objects) find(kind, name string) *unstructured.Unstructured {
	for _, obj := range o.ofKind(kind) {
		if obj.GetName() == name {
			return obj
		}
	}
	return nil
}

// get returns the typed object kind/name; the test fails if the chart did not render it.
func get[T any](t *testing.T, o objects, kind, name string) *T {
	t.Helper()
	obj := o.find(kind, name)
	require.NotNil(t, obj, "rendered %s %q; have %s: %v", kind, name, kind, o.names(kind))
	typed := new(T)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed), "converting %s %s", kind, name)
	return typed
}

func operatorArgs(t *testing.T, o objects) []string {
	t.Helper()
	deploy := get[appsv1.Deployment](t, o, "Deployment", testRelease+"-operator")
	require.Len(t, deploy.Spec.Template.Spec.Containers, 1)
	return deploy.Spec.Template.Spec.Containers[0].Args
}

// testCABundle is a base64-encoded PEM CA certificate, as a user puts into webhook.caBundle.
func testCABundle(t *testing.T) string {
	t.Helper()
	ca, err := pki.NewCertificateAuthority("external-test-ca", time.Hour)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(ca.PEM)
}

// webhookView is what the chart controls on one webhook, for validating and mutating alike.
type webhookView struct {
	name              string
	clientConfig      admissionregistrationv1.WebhookClientConfig
	failurePolicy     *admissionregistrationv1.FailurePolicyType
	timeoutSeconds    *int32
	namespaceSelector *metav1.LabelSelector
}

func validatingViews(c *admissionregistrationv1.ValidatingWebhookConfiguration) []webhookView {
	var out []webhookView
	for _, w := range c.Webhooks {
		out = append(out, webhookView{w.Name, w.ClientConfig, w.FailurePolicy, w.TimeoutSeconds, w.NamespaceSelector})
	}
	return out
}

func mutatingViews(c *admissionregistrationv1.MutatingWebhookConfiguration) []webhookView {
	var out []webhookView
	for _, w := range c.Webhooks {
		out = append(out, webhookView{w.Name, w.ClientConfig, w.FailurePolicy, w.TimeoutSeconds, w.NamespaceSelector})
	}
	return out
}

func webhookConfigs(t *testing.T, o objects, validatingName, mutatingName string) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	t.Helper()
	return get[admissionregistrationv1.ValidatingWebhookConfiguration](t, o, "ValidatingWebhookConfiguration", validatingName),
		get[admissionregistrationv1.MutatingWebhookConfiguration](t, o, "MutatingWebhookConfiguration", mutatingName)
}

func allWebhooks(t *testing.T, o objects, validatingName, mutatingName string) []webhookView {
	t.Helper()
	vwc, mwc := webhookConfigs(t, o, validatingName, mutatingName)
	return append(validatingViews(vwc), mutatingViews(mwc)...)
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

func certVolume(t *testing.T, o objects) corev1.Volume {
	t.Helper()
	deploy := get[appsv1.Deployment](t, o, "Deployment", testRelease+"-operator")
	container := deploy.Spec.Template.Spec.Containers[0]
	var mountedName string
	for _, m := range container.VolumeMounts {
		if m.MountPath == "/tmp/k8s-webhook-server/serving-certs" {
			mountedName = m.Name
		}
	}
	require.NotEmpty(t, mountedName, "a volume is mounted at the webhook cert dir")
	for _, v := range deploy.Spec.Template.Spec.Volumes {
		if v.Name == mountedName {
			return v
		}
	}
	require.FailNow(t, "volume not found", "mounted volume %q is not in the pod spec", mountedName)
	return corev1.Volume{}
}

func dgdrConversion(t *testing.T, o objects) *apiextensionsv1.CustomResourceConversion {
	t.Helper()
	crd := get[apiextensionsv1.CustomResourceDefinition](t, o, "CustomResourceDefinition", dgdrCRD)
	require.NotNil(t, crd.Spec.Conversion, "DGDR CRD has a conversion config")
	return crd.Spec.Conversion
}

// allows reports whether rules grant verb on group/resource (named name) — RBAC's matching for
// the rule shapes this chart uses (no wildcards, no nonResourceURLs).
func allows(rules []rbacv1.PolicyRule, group, resource, verb, name string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

func assertDynamoRules(t *testing.T, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, resource := range []string{"dynamocomponentdeployments", "dynamographdeployments", "dynamomodels", "dynamographdeploymentrequests"} {
		for _, verb := range []string{"get", "list", "watch", "update", "patch"} {
			assert.True(t, allows(rules, "nvidia.com", resource, verb, ""), "%s %s", verb, resource)
		}
		for _, sub := range []string{"/status", "/finalizers"} {
			assert.True(t, allows(rules, "nvidia.com", resource+sub, "update", ""), "update %s%s", resource, sub)
		}
	}
	for _, verb := range []string{"create", "patch"} {
		assert.True(t, allows(rules, "", "events", verb, ""), "%s events", verb)
	}
}
