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

// TestSmokeBench runs the whole pipeline in seconds: a real API server
// (envtest) with the chart's webhook objects, the operator binary as a
// subprocess, every ladder at two low rates, result.json, report.md and the
// plots, and a comparison of the run with itself, which must pass.
func TestSmokeBench(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a control plane and the operator")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()

	tb, err := testbed.StartEnvtest(ctx, testbed.EnvtestOptions{WorkDir: dir, Progress: testWriter{t}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, tb.Close(context.Background())) })

	cfg := benchmark.Smoke()
	cfg.Progress = testWriter{t}
	res, err := benchmark.Run(ctx, tb, cfg, "smoke")
	require.NoError(t, err)

	files, err := benchmark.Write(dir, res, cfg, nil)
	require.NoError(t, err)
	for _, f := range files {
		info, err := os.Stat(f)
		require.NoError(t, err)
		assert.Positive(t, info.Size(), f)
	}

	got, err := result.Read(filepath.Join(dir, result.FileName))
	require.NoError(t, err)
	assert.Equal(t, "envtest", got.Provider)
	assert.Equal(t, workspace.KubernetesVersion, got.KubernetesVersion)
	assert.Len(t, got.Steps, 3*len(cfg.DirectRates)+2*len(cfg.APIServerRates))

	t.Run("every request got the answer its object deserved", func(t *testing.T) {
		for _, s := range got.Steps {
			assert.InDelta(t, 1.0, s.SuccessRatio, 1e-9, "%s: errors %v, status codes %v", s.Key(), s.Errors, s.StatusCodes)
			assert.InDelta(t, s.Rate*cfg.Duration.Seconds(), float64(s.Requests), s.Rate*cfg.Duration.Seconds()*0.1, s.Key())
			assert.Positive(t, s.P99Ms, s.Key())
			windowed := 0
			for _, w := range s.Windows {
				windowed += w.Requests
			}
			assert.EqualValues(t, s.Requests, windowed, "%s: every request lands in a window", s.Key())
		}
	})

	t.Run("the servers' histograms cover the measured window", func(t *testing.T) {
		for _, s := range got.Steps {
			hist := map[string]result.ServerHistogram{}
			for _, h := range s.ServerHistograms {
				hist[h.Source+" "+h.Labels["webhook"]+h.Labels["name"]] = h
			}
			switch s.Name {
			case benchmark.DirectValidate, benchmark.DirectMutate:
				webhook := strings.TrimSuffix(strings.TrimPrefix(s.Name, "direct/"), "-dgd") + "-dynamographdeployment"
				h, ok := hist["operator "+webhook]
				require.True(t, ok, "%s: no operator histogram for %s in %v", s.Key(), webhook, s.ServerHistograms)
				// Warm-up requests fall outside the window.
				assert.Equal(t, s.Requests, h.Count, s.Key())
			case benchmark.APIServerDGD:
				for _, key := range []string{"apiserver vdynamographdeployment.nvidia.com", "apiserver mdynamographdeployment.nvidia.com",
					"operator validate-dynamographdeployment", "operator mutate-dynamographdeployment"} {
					h, ok := hist[key]
					require.True(t, ok, "%s: no histogram %q in %v", s.Key(), key, s.ServerHistograms)
					assert.Equal(t, s.Requests, h.Count, "%s: %s", s.Key(), key)
				}
			case benchmark.APIServerDGDCtl, benchmark.DirectControl:
				assert.Empty(t, s.ServerHistograms, "%s: the control must not reach any webhook", s.Key())
			}
		}
	})

	t.Run("the report states targets, overhead and server-side latency", func(t *testing.T) {
		md, err := os.ReadFile(filepath.Join(dir, report.ReportFile)) //nolint:gosec // G304: the report the run wrote under t.TempDir()
		require.NoError(t, err)
		for _, want := range []string{"## Highest rate under the p99 target", "## Admission overhead through the API server",
			"## Server-side latency (Prometheus histograms)", benchmark.APIServerHistogram, "invalidRatio=0.2"} {
			assert.Contains(t, string(md), want)
		}
		assert.Len(t, got.Overheads(result.APIServer), len(cfg.APIServerRates))
	})

	t.Run("a run compared with itself passes", func(t *testing.T) {
		c := result.Compare(got, got, result.DefaultTolerances())
		assert.False(t, c.Failed())
		assert.Equal(t, len(got.Steps), c.Count(result.Pass))
	})
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
