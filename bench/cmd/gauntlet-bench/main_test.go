package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/bench/benchmark"
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

// writeRun writes a result.json of run name under dir with one step, direct/validate-dgd @ 100
// req/s, at the given percentiles, and returns its path.
func writeRun(t *testing.T, dir, name string, p50, p99 float64) string {
	t.Helper()
	path := filepath.Join(dir, name, result.FileName)
	require.NoError(t, result.Write(path, result.Result{Run: name, Steps: []result.Step{{
		StepSpec: result.StepSpec{Name: "direct/validate-dgd", Mode: result.Direct, Rate: 100},
		Requests: 1000, SuccessRatio: 1, AchievedRate: 100, P50Ms: p50, P99Ms: p99,
	}}}))
	return path
}

func TestCompareCommandFailsOnRegressionOnly(t *testing.T) {
	dir := t.TempDir()
	base, rerun, slow := writeRun(t, dir, "base", 0.4, 2), writeRun(t, dir, "rerun", 0.4, 2.3), writeRun(t, dir, "slow", 0.4, 7)

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

func TestABCommandRejectsBadInputBeforeBuildingAnything(t *testing.T) {
	ctx := context.Background()
	var ue usageError
	require.ErrorAs(t, abCommand(ctx, nil), &ue)
	require.EqualError(t, abCommand(ctx, nil), "--base-ref is required: the git reference side A is built from (make bench-compare BASE_REF=main)")
	require.ErrorAs(t, abCommand(ctx, []string{"--base-ref", "HEAD", "--windows", "0"}), &ue)
	require.ErrorAs(t, abCommand(ctx, []string{"--base-ref", "HEAD", "--set-b", "webhook.latencyInjection"}), &ue)
	require.EqualError(t, abCommand(ctx, []string{"--base-ref", "HEAD", "--segments", "3"}),
		"--segments=3: must be even and at least 2 (the sides take turns in pairs: A B B A)")
	require.EqualError(t, abCommand(ctx, []string{"--base-ref", "HEAD", "--segment-warmup", "-1s"}), "--segment-warmup=-1s: must not be negative")

	err := abCommand(ctx, []string{"--base-ref", "no-such-ref-9f3c", "--out", t.TempDir()})
	require.Error(t, err)
	assert.Regexp(t, `^BASE_REF=no-such-ref-9f3c names no commit of the repository at .+: give a branch, tag or commit \(`+"`git log --oneline`"+` lists them\)$`, err.Error())
}

func TestShortRev(t *testing.T) {
	assert.Equal(t, "95148e2f4878", shortRev("95148e2f4878b0c1d2e3f4a5b6c7d8e9f0a1b2c3"))
	assert.Equal(t, "95148e2f4878-dirty", shortRev("95148e2f4878b0c1d2e3f4a5b6c7d8e9f0a1b2c3-dirty"))
	assert.Equal(t, "abc", shortRev("abc"))
}

func TestCompareABJudgesWithTheABToleranceDefaultsUnderTheFlagsGiven(t *testing.T) {
	dir := t.TempDir()
	// p50 2 ms → 2.8 ms: +40 % and +0.8 ms, above the A/B run's +25 % and 0.5 ms, one window each side (no test).
	a, b := writeRun(t, dir, "a", 2, 5), writeRun(t, dir, "b", 2.8, 5)
	require.ErrorIs(t, compareCommand([]string{"--ab", "--base", a, "--current", b}), errRegressed, "the A/B run's p50 tolerance")
	require.NoError(t, compareCommand([]string{"--ab", "--base", a, "--current", b, "--p50-ratio", "0.5"}), "a tolerance given on the command line wins")
	require.NoError(t, compareCommand([]string{"--ab=false", "--base", a, "--current", b}), "without --ab, the stored-baseline tolerances")
}

// TestCompareABWritesTheWholeABReport: judged again with --markdown, a finished A/B run's
// whole report is written again (report.ABMarkdown, whose sections have tests of their own),
// linking to the sides' reports from where it is written.
func TestCompareABWritesTheWholeABReport(t *testing.T) {
	dir := t.TempDir()
	a, b := writeRun(t, dir, "a", 2, 5), writeRun(t, dir, "b", 2, 5)
	md := filepath.Join(dir, "again", "report.md")
	require.NoError(t, os.Mkdir(filepath.Dir(md), 0o750))
	require.NoError(t, compareCommand([]string{"--ab", "--base", a, "--current", b, "--markdown", md, "--floor-ratio-goal", "1.5"}))
	got, err := os.ReadFile(md) //nolint:gosec // G304: the report the command wrote under t.TempDir()
	require.NoError(t, err)
	assert.Contains(t, string(got), "# Webhook latency A/B")
	assert.Contains(t, string(got), "## A/B comparison: side B against side A, measured in one run")
	assert.Contains(t, string(got), "[side A](../a/report.md), [side B](../b/report.md)")

	var ue usageError
	err = compareCommand([]string{"--ab", "--base", a, "--current", b, "--markdown", md, "--floor-ratio-goal", "0.8"})
	require.ErrorAs(t, err, &ue)
	require.EqualError(t, err, "--floor-ratio-goal=0.8: must be at least 1 (the floor's own overhead)")
}

func TestABCommandOfATargetRejectsBadInputBeforeBuildingAnything(t *testing.T) {
	ctx := context.Background()
	var ue usageError
	err := abCommand(ctx, []string{"--target", "gatekeeper"})
	require.ErrorAs(t, err, &ue)
	require.EqualError(t, err, "--target and --base-version go together: make bench-compare TARGET=gatekeeper BASE_VERSION=v3.17.0")
	err = abCommand(ctx, []string{"--target", "gatekeeper", "--base-version", "v3.17.0", "--base-ref", "HEAD"})
	require.ErrorAs(t, err, &ue)
	require.EqualError(t, err, "--base-ref compares two revisions of gauntlet's operator, --target two versions of a target: give one")
	err = abCommand(ctx, []string{"--target", "gauntlet", "--base-version", "v1.0.0"})
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), "not from a Go module version")
	err = abCommand(ctx, []string{"--target", "gatekeeper", "--base-version", "v3.17.0", "--direct-rates", "100"})
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), "a target is measured through the API server only")
}

// TestABCommandOfATargetNamesTheVersionsTheProxyServes runs the command against a go command
// that answers as the module proxy does when it serves v3.17.0 and v3.23.1 of Gatekeeper only.
func TestABCommandOfATargetNamesTheVersionsTheProxyServes(t *testing.T) {
	bin := t.TempDir()
	fake := `#!/bin/sh
case "$*" in
"mod download -json "*) echo '{"Error": "reading proxy: 404 Not Found"}'; exit 1 ;;
"list -m -versions -json "*) echo '{"Versions": ["v3.17.0", "v3.23.1"]}' ;;
*) echo "unexpected go $*" >&2; exit 2 ;;
esac
`
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte(fake), 0o700)) //nolint:gosec // G306: an executable
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out := t.TempDir()
	err := abCommand(context.Background(), []string{"--target", "gatekeeper", "--base-version", "v3.99.0", "--out", out})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--base-version v3.99.0: target gatekeeper at v3.99.0: ")
	assert.Contains(t, err.Error(), "the Go module proxy does not serve version v3.99.0 of github.com/open-policy-agent/gatekeeper/v3; it serves v3.17.0, v3.23.1")
	entries, _ := os.ReadDir(out)
	assert.Empty(t, entries, "nothing written before the version is known to be served")
}

func TestLadderFlagsRefuseAFloorRatioGoalUnderOne(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	l := ladderFlags(fs, benchmark.Defaults())
	require.NoError(t, fs.Parse([]string{"--floor-ratio-goal", "0.9"}))
	cfg := benchmark.Defaults()
	require.EqualError(t, l.apply(&cfg), "--floor-ratio-goal=0.9: must be at least 1 (the floor's own overhead)")
	require.NoError(t, fs.Parse([]string{"--floor-ratio-goal", "1.5"}))
	require.NoError(t, l.apply(&cfg))
	assert.InDelta(t, 1.5, cfg.FloorRatioGoal, 1e-9)
	assert.Equal(t, "1.5", cfg.Settings()["floorRatioGoal"], "recorded in the result's settings")
}
