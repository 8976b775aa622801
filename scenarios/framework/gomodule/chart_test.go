package gomodule

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moduleWithCharts lays out, as the module cache would, module github.com/Example/op@v1.2.3-RC
// with a chart (that has a subchart), a chart elsewhere and a directory without a chart.
func moduleWithCharts(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "github.com", "!example", "op@v1.2.3-!r!c")
	for file, body := range map[string]string{
		"go.mod":                            "module github.com/Example/op\n\ngo 1.26\n",
		"charts/op/Chart.yaml":              "name: op\n",
		"charts/op/charts/crds/Chart.yaml":  "name: crds\n",
		"deploy/helm/op-lite/Chart.yaml":    "name: op-lite\n",
		"charts/README.md":                  "charts\n",
		"charts/op-crds/templates/crd.yaml": "kind: CustomResourceDefinition\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(file))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o750))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
	return dir
}

func TestChartDirFindsTheChart(t *testing.T) {
	dir := moduleWithCharts(t)
	got, err := ChartDir(dir, "charts/op")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "charts", "op"), got)
}

func TestChartDirNamesTheChartsTheModuleHas(t *testing.T) {
	dir := moduleWithCharts(t)
	_, err := ChartDir(dir, "charts/operator")
	require.EqualError(t, err, "no chart charts/operator in github.com/Example/op@v1.2.3-RC: the module has no directory charts/operator ("+dir+
		"); it has these charts: charts/op, deploy/helm/op-lite")
}

func TestChartDirSaysWhenTheDirectoryHasNoChart(t *testing.T) {
	dir := moduleWithCharts(t)
	_, err := ChartDir(dir, "charts/op-crds")
	require.ErrorContains(t, err, "the module has no Chart.yaml in charts/op-crds")
}

func TestChartDirOfAModuleWithoutCharts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "example.com", "lib@v0.1.0")
	require.NoError(t, os.MkdirAll(dir, 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/lib\n"), 0o600))
	_, err := ChartDir(dir, "charts/lib")
	require.ErrorContains(t, err, "no chart charts/lib in example.com/lib@v0.1.0: ")
	require.ErrorContains(t, err, "it has no chart at all (no Chart.yaml anywhere)")
}

func TestChartDirStaysInsideTheModule(t *testing.T) {
	dir := moduleWithCharts(t)
	for _, rel := range []string{"", "../op@v1.2.2/charts/op", "/charts/op"} {
		_, err := ChartDir(dir, rel)
		require.ErrorContains(t, err, "must be a path inside the module", "%q", rel)
		assert.Contains(t, err.Error(), "github.com/Example/op@v1.2.3-RC")
	}
}
