package benchmark_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/bench/benchmark"
	"github.com/gauntlet-dev/gauntlet/bench/report"
	"github.com/gauntlet-dev/gauntlet/bench/result"
	"github.com/gauntlet-dev/gauntlet/bench/testbed"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// TestABSmokeOnLocal runs `make bench-compare`'s pipeline in about a minute: side A built from
// a git worktree of HEAD, side B from the working tree, both released into one local cluster
// with the floor, every ladder at two low rates, each side's result and the A/B report, and a
// verdict that must pass (the same code on both sides).
func TestABSmokeOnLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: creates a local cluster")
	}
	if _, err := workspace.ControlPlaneAssets("kube-apiserver"); err != nil {
		t.Skipf("no control plane to start: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()

	base, err := testbed.CheckoutRef(ctx, "HEAD")
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, base.Remove(context.Background()))
		_, err := os.Stat(base.Root)
		assert.True(t, os.IsNotExist(err), "the worktree of side A is removed")
	})
	pair, err := testbed.StartLocalAB(ctx, testbed.LocalOptions{ClusterName: "gauntlet-bench-ab-smoke", Progress: testWriter{t}},
		testbed.Side{Name: "HEAD", Root: base.Root}, testbed.Side{Name: "the working tree"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, pair.Close(context.Background())) })

	cfg := benchmark.Smoke()
	cfg.Progress = testWriter{t}
	a, b, err := benchmark.RunAB(ctx, pair, cfg, "smoke", benchmark.ABRevisions{A: base.Revision, B: "working-tree"})
	require.NoError(t, err)

	// Per rate: validate and mutate on each side; through the API server the webhook ladder on
	// each side, and the control and the three floors once, on both sides' records — all in turns.
	want := 2*len(cfg.DirectRates) + 5*len(cfg.APIServerRates)
	require.Len(t, a.Steps, want)
	require.Len(t, b.Steps, want)
	for i := range a.Steps {
		sa, sb := a.Steps[i], b.Steps[i]
		assert.Equal(t, sa.Key(), sb.Key())
		assert.InDelta(t, 1.0, sa.SuccessRatio, 1e-9, "side A %s: %v", sa.Key(), sa.Errors)
		assert.InDelta(t, 1.0, sb.SuccessRatio, 1e-9, "side B %s: %v", sb.Key(), sb.Errors)
		shared := sa.Name == benchmark.APIServerDGDCtl || strings.HasPrefix(sa.Name, benchmark.APIServerFloor)
		assert.Equal(t, shared, sa.Shared, sa.Key())
		perSegment := max(1, cfg.Windows/cfg.Segments)
		assert.Len(t, sa.Windows, cfg.Segments*perSegment, "%s: %d windows per segment", sa.Key(), perSegment)
		assert.Len(t, sb.Windows, cfg.Segments*perSegment, sb.Key())
		assert.Equal(t, cfg.Segments, sa.Segments, sa.Key())
	}
	for _, floor := range []string{benchmark.APIServerFloor, benchmark.APIServerFloorPatching} {
		ratios := a.FloorRatios(benchmark.APIServerDGD, floor)
		assert.Len(t, ratios, len(cfg.APIServerRates), "%s measured at every rate", floor)
		for _, fr := range ratios {
			assert.NotNil(t, fr.P50Interval, "%s @ %g: measured in turns, the ratio has an interval", floor, fr.Rate)
		}
	}

	c := result.CompareAB(a, b, result.DefaultABTolerances(), 0)
	files, err := benchmark.WriteAB(dir, a, b, cfg, c)
	require.NoError(t, err)
	assert.Contains(t, files, filepath.Join(dir, report.ReportFile))
	md, err := os.ReadFile(filepath.Join(dir, report.ReportFile)) //nolint:gosec // G304: the report the run wrote under t.TempDir()
	require.NoError(t, err)
	for _, s := range []string{"## A/B comparison: side B against side A, measured in one run", "## Side A: operator overhead against the floor",
		"## Side B: operator overhead against the floor", "## Side A: operator overhead against the patching floor",
		"## Side A against the goal", "## Side B's ratio to the floor against side A's",
		"## Side A: the Service hop: the floor through its Service against the floor at its pod's address", "(a/report.md)"} {
		assert.Contains(t, string(md), s)
	}
	assert.Zero(t, c.Count(result.Missing), "every step measured on both sides")
}
