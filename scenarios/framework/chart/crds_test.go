package chart_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
)

func TestCRDs(t *testing.T) {
	dir, err := chart.Dir()
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(dir, "files", "crds", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "generated CRDs in files/crds")
	var want []string
	for _, file := range files {
		raw, err := os.ReadFile(file) //nolint:gosec // G304: a generated CRD of the chart in this repository
		require.NoError(t, err)
		objs, err := chart.DecodeManifest(string(raw))
		require.NoError(t, err, "decoding %s", file)
		for _, obj := range objs {
			want = append(want, obj.GetName())
		}
	}
	slices.Sort(want)
	require.Contains(t, want, dgdrCRD)

	t.Run("every generated CRD is rendered", func(t *testing.T) {
		o := render(t, testNamespace, "")
		assert.Equal(t, want, o.names("CustomResourceDefinition"))
		for _, obj := range o.ofKind("CustomResourceDefinition") {
			assert.Equal(t, "keep", obj.GetAnnotations()["helm.sh/resource-policy"], "CRD %s survives helm uninstall", obj.GetName())
		}
	})

	t.Run("DGDR conversion webhook points at the release's Service", func(t *testing.T) {
		conversion := dgdrConversion(t, render(t, testNamespace, ""))
		assert.Equal(t, apiextensionsv1.WebhookConverter, conversion.Strategy)
		require.NotNil(t, conversion.Webhook)
		assert.Equal(t, []string{"v1"}, conversion.Webhook.ConversionReviewVersions)
		require.NotNil(t, conversion.Webhook.ClientConfig)
		assert.Equal(t, &apiextensionsv1.ServiceReference{
			Namespace: testNamespace,
			Name:      "dynamo-webhook-service",
			Path:      ptr("/convert"),
			Port:      ptr(int32(443)),
		}, conversion.Webhook.ClientConfig.Service)
		assert.Empty(t, conversion.Webhook.ClientConfig.CABundle, "automatic mode: the operator injects it")
	})

	t.Run("the generated schema is rendered unchanged", func(t *testing.T) {
		o := render(t, testNamespace, "")
		for _, file := range files {
			raw, err := os.ReadFile(file) //nolint:gosec // G304: a generated CRD of the chart in this repository
			require.NoError(t, err)
			objs, err := chart.DecodeManifest(string(raw))
			require.NoError(t, err)
			for _, obj := range objs {
				var generated apiextensionsv1.CustomResourceDefinition
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &generated))
				rendered := get[apiextensionsv1.CustomResourceDefinition](t, o, "CustomResourceDefinition", generated.Name)
				assert.Equal(t, generated.Spec.Versions, rendered.Spec.Versions, "CRD %s versions and schemas", generated.Name)
				assert.Equal(t, generated.Spec.Names, rendered.Spec.Names, "CRD %s names", generated.Name)
				assert.Equal(t, generated.Spec.Scope, rendered.Spec.Scope, "CRD %s scope", generated.Name)
			}
		}
	})

	t.Run("crds.keep=false drops the keep policy", func(t *testing.T) {
		o := render(t, testNamespace, `{crds: {keep: false}}`)
		for _, obj := range o.ofKind("CustomResourceDefinition") {
			assert.NotContains(t, obj.GetAnnotations(), "helm.sh/resource-policy", "CRD %s", obj.GetName())
		}
	})

	t.Run("crds.install=false renders no CRDs and leaves the CRD alone", func(t *testing.T) {
		o := render(t, testNamespace, `{crds: {install: false}}`)
		assert.Empty(t, o.ofKind("CustomResourceDefinition"))
		for _, arg := range operatorArgs(t, o) {
			assert.False(t, strings.HasPrefix(arg, "--conversion-crd"), "operator arg %s", arg)
		}
		role := get[rbacv1.ClusterRole](t, o, "ClusterRole", "dynamo-operator")
		assert.False(t, allows(role.Rules, "apiextensions.k8s.io", "customresourcedefinitions", "get", dgdrCRD), "no CRD permission without CRDs")
	})
}
