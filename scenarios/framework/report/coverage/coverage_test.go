package coverage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePercent(t *testing.T) {
	out := []byte("\tgithub.com/gauntlet-dev/gauntlet/operator/internal/certs\t\tcoverage: 71.4% of statements\n" +
		"\tgithub.com/gauntlet-dev/gauntlet/operator/api/v1beta1\t\tcoverage: 0.0% of statements\n" +
		// A package without statements: its name, no newline (what go 1.26 prints).
		"\tgithub.com/gauntlet-dev/gauntlet/operator/internal/version\t\t\tgithub.com/gauntlet-dev/gauntlet/operator/internal/webhook\t\tcoverage: 64.2% of statements\n")
	got, err := ParsePercent(out)
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{
		"github.com/gauntlet-dev/gauntlet/operator/internal/certs":   71.4,
		"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1":      0,
		"github.com/gauntlet-dev/gauntlet/operator/internal/webhook": 64.2,
	}, got)

	_, err = ParsePercent([]byte("warning: something else\n"))
	require.ErrorContains(t, err, `unexpected line "warning: something else"`)
}

func TestParseFunc(t *testing.T) {
	out := []byte("github.com/gauntlet-dev/gauntlet/operator/internal/certs/controller.go:42:\tReconcile\t\t85.7%\n" +
		"github.com/gauntlet-dev/gauntlet/operator/internal/webhook/server.go:10:\t\tnewGuard\t\t0.0%\n" +
		"total:\t\t\t\t\t\t\t\t(statements)\t\t61.2%\n")
	funcs, total, err := ParseFunc(out)
	require.NoError(t, err)
	assert.InDelta(t, 61.2, total, 1e-9)
	require.Len(t, funcs, 2)
	assert.Equal(t, Func{
		Package: "github.com/gauntlet-dev/gauntlet/operator/internal/webhook",
		File:    "github.com/gauntlet-dev/gauntlet/operator/internal/webhook/server.go",
		Line:    10, Name: "newGuard", Percent: 0,
	}, funcs[1])

	_, _, err = ParseFunc([]byte("a.go:1:\tf\t1.0%\n"))
	require.ErrorContains(t, err, "no total line")
}

func TestMarkdownNamesWhatE2ENeverEnters(t *testing.T) {
	r := &Report{
		E2ETotal: 55.5, MergedTotal: 80,
		Packages: []Package{
			{Path: "github.com/gauntlet-dev/gauntlet/operator/internal/certs", E2E: 70, Unit: 90, HasUnitCounts: true, Merged: 95},
			{Path: "github.com/gauntlet-dev/gauntlet/operator/cmd/dynamo-operator", E2E: 60, Merged: 60},
		},
		NeverEntered: []Func{{Name: "expire", File: "github.com/gauntlet-dev/gauntlet/operator/internal/certs/ca.go", Line: 7}},
	}
	var b strings.Builder
	require.NoError(t, r.WriteMarkdown(&b))
	md := b.String()
	assert.Contains(t, md, "operator covered by e2e: 55.5 %")
	assert.Contains(t, md, "| `operator/internal/certs` | 70.0 % | 90.0 % | 95.0 % |")
	assert.Contains(t, md, "| `operator/cmd/dynamo-operator` | 60.0 % | — | 60.0 % |")
	assert.Contains(t, md, "- `expire` — operator/internal/certs/ca.go:7")
}

func TestBuildFailsClearlyWithoutCounters(t *testing.T) {
	dir := t.TempDir()
	_, err := Build(t.Context(), ".", dir, "", t.TempDir())
	require.ErrorContains(t, err, "no coverage counters (covcounters.*) in "+dir+" or its subdirectories")
}

func TestCounterDirsFindsOneDirectoryPerSuite(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"autocert", "hostile", "empty"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o750))
	}
	for _, d := range []string{"autocert", "hostile"} {
		require.NoError(t, os.WriteFile(filepath.Join(root, d, "covcounters.abc.1.2"), nil, 0o600))
	}
	dirs, err := CounterDirs(root)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(root, "autocert"), filepath.Join(root, "hostile")}, dirs)
}
