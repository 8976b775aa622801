package target

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	helmchart "helm.sh/helm/v3/pkg/chart"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
)

// parentChart lists api (from a repository, installed when crds.install) and carries grafana.
func parentChart() *helmchart.Chart {
	ch := &helmchart.Chart{
		Metadata: &helmchart.Metadata{APIVersion: "v2", Name: "parent", Version: "1.0.0", Dependencies: []*helmchart.Dependency{
			{Name: "grafana", Version: "1.0.0"},
			{Name: "api", Version: "0.1.0", Repository: "https://example.com/charts", Condition: "crds.install"},
		}},
		Values: map[string]any{"crds": map[string]any{"install": true}},
	}
	ch.AddDependency(&helmchart.Chart{Metadata: &helmchart.Metadata{APIVersion: "v2", Name: "grafana", Version: "1.0.0"}})
	return ch
}

func subChart(name string) *helmchart.Chart {
	return &helmchart.Chart{
		Metadata: &helmchart.Metadata{APIVersion: "v2", Name: name, Version: "v0.0.0"},
		Templates: []*helmchart.File{{Name: "templates/crd.yaml", Data: []byte(
			"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\n")}},
	}
}

// A subchart the chart lists from a repository and does not carry is added, and renders with
// the chart under the listed condition.
func TestAddDependencyAddsAListedSubchartTheChartDoesNotCarry(t *testing.T) {
	ch := parentChart()
	require.NoError(t, addDependency(ch, "api", subChart("api")))
	objs, err := chart.RenderChart(ch, "r", "ns", nil)
	require.NoError(t, err)
	require.Len(t, objs, 1)
	assert.Equal(t, "things.example.com", objs[0].GetName())

	objs, err = chart.RenderChart(ch, "r", "ns", map[string]any{"crds": map[string]any{"install": false}})
	require.NoError(t, err)
	assert.Empty(t, objs, "the chart's condition still decides")
}

func TestAddDependencyRefusesWhatTheChartDoesNotList(t *testing.T) {
	require.EqualError(t, addDependency(parentChart(), "api", subChart("other")), "the subchart there is other, not api")
	require.EqualError(t, addDependency(parentChart(), "other", subChart("other")), "chart parent lists no dependency other (it lists: grafana, api)")
	require.EqualError(t, addDependency(parentChart(), "grafana", subChart("grafana")), "chart parent carries grafana in its charts/ directory already: leave it out")
}
