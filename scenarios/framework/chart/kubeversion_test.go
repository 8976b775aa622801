package chart_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	helmchart "helm.sh/helm/v3/pkg/chart"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
)

// needsNewKube requires a newer Kubernetes than the Helm SDK's default (v1.20.0), as Kyverno's
// chart does (kubeVersion >=1.25.0-0), and shows the version it is rendered for.
func needsNewKube() *helmchart.Chart {
	return &helmchart.Chart{
		Metadata: &helmchart.Metadata{APIVersion: "v2", Name: "needs-new-kube", Version: "0.1.0", KubeVersion: ">=1.25.0-0"},
		Templates: []*helmchart.File{{
			Name: "templates/cm.yaml",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube\ndata:\n  version: {{ .Capabilities.KubeVersion.Version | quote }}\n"),
		}},
	}
}

func TestRenderChartForRendersForTheClustersKubernetesVersion(t *testing.T) {
	objs, err := chart.RenderChartFor(needsNewKube(), "r", "ns", nil, "v1.37.2")
	require.NoError(t, err)
	require.Len(t, objs, 1)
	assert.Equal(t, map[string]any{"version": "v1.37.2"}, objs[0].Object["data"])
}

func TestRenderChartForRefusesWhatTheChartRefuses(t *testing.T) {
	_, err := chart.RenderChart(needsNewKube(), "r", "ns", nil)
	require.ErrorContains(t, err, "chart requires kubeVersion: >=1.25.0-0 which is incompatible with Kubernetes v1.20.0")
	_, err = chart.RenderChartFor(needsNewKube(), "r", "ns", nil, "v1.24.9")
	require.ErrorContains(t, err, "incompatible with Kubernetes v1.24.9")
	_, err = chart.RenderChartFor(needsNewKube(), "r", "ns", nil, "one-point-thirty")
	require.ErrorContains(t, err, `rendering chart needs-new-kube for Kubernetes "one-point-thirty"`)
}
