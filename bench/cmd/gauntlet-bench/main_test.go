package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/bench/result"
)

func TestParseRates(t *testing.T) {
	got, err := parseRates("100, 250,1000")
	require.NoError(t, err)
	assert.Equal(t, []float64{100, 250, 1000}, got)

	got, err = parseRates("none")
	require.NoError(t, err)
	assert.Empty(t, got)

	for in, want := range map[string]string{
		"100,2.5": `rate "2.5": want a whole number of requests per second ≥ 1`,
		"0":       `rate "0": want a whole number of requests per second ≥ 1`,
		"fast":    `rate "fast": want a whole number of requests per second ≥ 1`,
		"200,100": "rates must ascend: 100 after 200",
	} {
		_, err := parseRates(in)
		assert.EqualError(t, err, want, in)
	}
}

func TestCompareCommandFailsOnRegressionOnly(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, p99 float64) string {
		path := filepath.Join(dir, name, result.FileName)
		require.NoError(t, result.Write(path, result.Result{Run: name, Steps: []result.Step{{
			StepSpec: result.StepSpec{Name: "direct/validate-dgd", Mode: result.Direct, Rate: 100},
			Requests: 1000, SuccessRatio: 1, P50Ms: 0.4, P99Ms: p99,
		}}}))
		return path
	}
	base, rerun, slow := write("base", 2), write("rerun", 2.3), write("slow", 7)

	require.NoError(t, compareCommand([]string{"--base", base, "--current", rerun}))
	md := filepath.Join(dir, "cmp.md")
	require.ErrorIs(t, compareCommand([]string{"--base", base, "--current", slow, "--markdown", md}), errRegressed)
	b, err := os.ReadFile(md) //nolint:gosec // G304: a file under the test's t.TempDir()
	require.NoError(t, err)
	assert.Contains(t, string(b), "**FAIL**")
	assert.NoError(t, compareCommand([]string{"--base", base, "--current", slow, "--p99-ratio", "3"}), "a looser stated tolerance passes it")

	assert.NoError(t, compareCommand([]string{"--base", base, "--current", slow, "--match", "^apiserver/"}),
		"nothing selected, nothing regressed")

	var ue usageError
	require.ErrorAs(t, compareCommand([]string{"--base", base}), &ue)
	assert.ErrorAs(t, compareCommand([]string{"--base", base, "--current", slow, "--match", "("}), &ue)
}
