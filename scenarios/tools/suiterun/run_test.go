package suiterun

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// fakeSuites stand in for go test: each suite is a shell script (its $1 is the suite's
// output directory, from suite.RunLogEnv) run as suite.InterruptibleCommand runs go test.
func fakeSuites(scripts map[string]string) func(ctx context.Context, name string) *exec.Cmd {
	return func(ctx context.Context, name string) *exec.Cmd {
		return suite.InterruptibleCommand(ctx, "sh", "-c", `dir=$(dirname "$`+suite.RunLogEnv+`"); `+scripts[name])
	}
}

// under puts each suite's directory under out, as `make e2e` does.
func under(out string) func(string) string {
	return func(name string) string { return filepath.Join(out, name) }
}

// syncBuffer is a bytes.Buffer safe to read while the run writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const greenSummary = `{"suite":"%s","provider":"local","kubernetesVersion":"v1.37.2","startedAt":"2026-12-01T10:00:00Z","seconds":1,"scenarios":[{"id":"A1","title":"a","result":"passed","seconds":1,"details":{}}]}`

func TestRunFollowsEverySuiteAndOneFailingStopsNone(t *testing.T) {
	out := t.TempDir()
	// An earlier run's summary must not pass for the crashing suite's.
	require.NoError(t, os.MkdirAll(filepath.Join(out, "crashes"), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(out, "crashes", "summary.json"), []byte(strings.ReplaceAll(greenSummary, "%s", "crashes")), 0o600))
	green := `echo '[   0.1s] ▶ A1 a graph without components is denied'; echo '[   1.1s] ✓ A1 passed (1.0s)'; printf '` + greenSummary + `' "$(basename "$dir")" > "$dir/summary.json"`
	var display syncBuffer
	r := New(Options{
		Suites: []string{"first", "crashes", "last"}, Jobs: 2, Dir: under(out), Display: Plain{W: &display},
		Command: fakeSuites(map[string]string{
			"first":   green,
			"crashes": `echo 'panic: something broke' >&2; exit 2`,
			"last":    green,
		}),
	})
	states := r.Run(context.Background())

	require.Len(t, states, 3)
	assert.True(t, states[0].OK())
	assert.False(t, states[1].OK())
	assert.Nil(t, states[1].Summary, "the earlier run's summary was removed before the suite started")
	assert.Equal(t, "panic: something broke", states[1].Explanation())
	assert.True(t, states[2].OK(), "the suite after the crash ran")
	assert.Equal(t, 1, states[2].Passed)

	log, err := os.ReadFile(filepath.Join(out, "first", LogFile)) //nolint:gosec // G304: the log the run wrote under t.TempDir()
	require.NoError(t, err)
	assert.Equal(t, "[   0.1s] ▶ A1 a graph without components is denied\n[   1.1s] ✓ A1 passed (1.0s)\n", string(log), "the suite's whole output, in its directory")
	stderr, err := os.ReadFile(filepath.Join(out, "crashes", LogFile)) //nolint:gosec // G304: the log the run wrote under t.TempDir()
	require.NoError(t, err)
	assert.Equal(t, "panic: something broke\n", string(stderr), "stderr too")

	assert.Contains(t, display.String(), "  first: A1 passed in 1.0s (1 passed, 0 failed so far)")
	assert.Contains(t, display.String(), "✗ crashes failed in")
	assert.Contains(t, display.String(), "go test ended (exit status 2) without a summary.json")

	var failures bytes.Buffer
	WriteFailures(&failures, states)
	assert.Equal(t, "\nFAILED\n  ✗ crashes: go test ended (exit status 2) without a summary.json\n      panic: something broke\n      log: "+
		filepath.Join(out, "crashes", LogFile)+"\n", failures.String())
}

func TestFailuresNameTheScenarioItsMessageAndArtifacts(t *testing.T) {
	out := t.TempDir()
	artifacts := suite.ArtifactsDir(filepath.Join(out, "autocert"), "C1")
	summary := `{"suite":"autocert","provider":"local","kubernetesVersion":"v1.37.2","startedAt":"2026-12-01T10:00:00Z","seconds":1,"scenarios":[` +
		`{"id":"A1","title":"a","result":"passed","seconds":1,"details":{}},` +
		`{"id":"C1","title":"the operator creates its certificate","result":"failed","seconds":30,"details":{"message":"expected a Secret; got none\nsecond line"}}]}`
	r := New(Options{
		Suites: []string{"autocert"}, Jobs: 1, Dir: under(out), Display: Plain{W: &syncBuffer{}},
		Command: fakeSuites(map[string]string{"autocert": `mkdir -p "$dir/artifacts/C1"; printf '%s' '` + summary + `' > "$dir/summary.json"; exit 1`}),
	})
	var b bytes.Buffer
	WriteFailures(&b, r.Run(context.Background()))
	assert.Equal(t, "\nFAILED\n"+
		"  ✗ autocert C1 the operator creates its certificate\n"+
		"      expected a Secret; got none\n"+
		"      artifacts: "+artifacts+"\n"+
		"      log: "+filepath.Join(out, "autocert", LogFile)+"\n", b.String())
}

func TestSetupFailureIsOneFailure(t *testing.T) {
	out := t.TempDir()
	require.NoError(t, os.MkdirAll(suite.ArtifactsDir(filepath.Join(out, "hostile"), suite.SetupArtifacts), 0o750))
	scenario := func(id string) string {
		return `{"id":"` + id + `","title":"t","result":"failed","seconds":0,"details":{"message":"` + suite.SetupFailedPrefix + `creating cluster: port 20000 is in use"}}`
	}
	s := SuiteState{Name: "hostile", Status: Ended, Dir: filepath.Join(out, "hostile"), Log: filepath.Join(out, "hostile", LogFile), Failed: 2}
	s.Summary = mustSummary(t, `{"suite":"hostile","provider":"local","kubernetesVersion":"","startedAt":"2026-12-01T10:00:00Z","seconds":1,"scenarios":[`+scenario("H1")+","+scenario("H2")+`]}`)
	var b bytes.Buffer
	WriteFailures(&b, []SuiteState{s})
	assert.Equal(t, "\nFAILED\n"+
		"  ✗ hostile: its setup failed, so its 2 scenarios did not run\n"+
		"      creating cluster: port 20000 is in use\n"+
		"      artifacts: "+suite.ArtifactsDir(filepath.Join(out, "hostile"), suite.SetupArtifacts)+"\n"+
		"      log: "+s.Log+"\n", b.String())
}

// TestAnInterruptReachesEverySuiteAndWaitsForTheirCleanup sends this process a real SIGINT: the
// run interrupts each running suite's process group, each cleans up (a suite deletes its
// cluster) and the run returns only after; the suite whose turn had not come never starts.
func TestAnInterruptReachesEverySuiteAndWaitsForTheirCleanup(t *testing.T) {
	out := t.TempDir()
	// The shell's trap runs once its sleep, interrupted too (same process group), has ended.
	cleansUp := `trap 'sleep 0.3; echo deleted > "$dir/cluster-deleted"; exit 130' INT; echo running; while :; do sleep 0.05; done`
	var display syncBuffer
	var notes []string
	var r *Runner
	ctx, stop := CancelOnSignal(context.Background(), func(sig os.Signal, first bool) {
		if first {
			r.Note("interrupted (" + sig.String() + "): every running suite deletes its cluster before it exits")
		}
		notes = append(notes, sig.String())
	})
	defer stop()
	r = New(Options{
		Suites: []string{"a", "b", "c"}, Jobs: 2, Dir: under(out), Display: Plain{W: &display},
		Command: fakeSuites(map[string]string{"a": cleansUp, "b": cleansUp, "c": cleansUp}),
	})
	done := make(chan []SuiteState)
	go func() { done <- r.Run(ctx) }()
	require.Eventually(t, func() bool {
		for _, s := range []string{"a", "b"} {
			if log, _ := os.ReadFile(filepath.Join(out, s, LogFile)); string(log) != "running\n" { //nolint:gosec // G304: the log the run writes under t.TempDir()
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	states := <-done

	for _, s := range []string{"a", "b"} {
		assert.FileExists(t, filepath.Join(out, s, "cluster-deleted"), "suite %s cleaned up before Run returned", s)
	}
	assert.Equal(t, NotStarted, states[2].Status)
	assert.NoDirExists(t, filepath.Join(out, "c"))
	assert.Equal(t, []string{"interrupt"}, notes)
	assert.Contains(t, display.String(), "interrupted (interrupt): every running suite deletes its cluster before it exits")
	assert.Contains(t, display.String(), "- c not started: the run was interrupted first")
}

func mustSummary(t *testing.T, raw string) *report.Summary {
	t.Helper()
	s, err := report.DecodeJSON(strings.NewReader(raw))
	require.NoError(t, err)
	return &s
}
