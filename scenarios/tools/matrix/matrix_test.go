package matrix

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
)

var supported = Supported{
	Versions:   []string{"v1.36.3", "v1.37.2"},
	Providers:  []string{"local", "kind"},
	Suites:     []string{"autocert", "hostile"},
	AddVersion: "add one with hack/add-k8s-version.sh",
}

func TestParsePlan(t *testing.T) {
	p, err := ParsePlan("", "", "", supported)
	require.NoError(t, err)
	assert.Equal(t, Plan{Versions: supported.Versions, Providers: supported.Providers, Suites: supported.Suites}, p, "empty lists mean everything supported")
	assert.Len(t, p.Cells(), 8)

	p, err = ParsePlan("v1.37.2", "kind, local kind", "hostile", supported)
	require.NoError(t, err)
	assert.Equal(t, []Cell{{Version: "v1.37.2", Provider: "kind", Suite: "hostile"}, {Version: "v1.37.2", Provider: "local", Suite: "hostile"}}, p.Cells(), "in the order given, without repeats")

	for _, bad := range []struct{ versions, providers, suites, want string }{
		{versions: "v1.35.4", want: `VERSIONS="v1.35.4": unknown Kubernetes version "v1.35.4"; supported: v1.36.3, v1.37.2 (add one with hack/add-k8s-version.sh)`},
		{providers: "local existing", want: `PROVIDERS="local existing": unknown provider "existing"; supported: local, kind`},
		{suites: "nope", want: `SUITES="nope": unknown suite "nope"; supported: autocert, hostile`},
	} {
		_, err := ParsePlan(bad.versions, bad.providers, bad.suites, supported)
		require.Error(t, err)
		assert.Contains(t, err.Error(), bad.want)
	}
}

func TestSupportedIn(t *testing.T) {
	root := t.TempDir()
	write := func(path, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o750))
		require.NoError(t, os.WriteFile(filepath.Join(root, path), []byte(content), 0o600))
	}
	for _, v := range []string{"v1.37.2", "v1.9.1", "v1.36.3"} {
		write(filepath.Join(ControlPlaneModules, v, "go.mod"), "module x\n\nrequire k8s.io/kubernetes "+v+"\n")
	}
	write(filepath.Join(ControlPlaneModules, "README"), "not a version\n")
	write("e2e/hostile/main_test.go", "package hostile\n")
	write("e2e/autocert/main_test.go", "package autocert\n")
	write("e2e/go.mod", "module e2e\n")
	s, err := SupportedIn(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"v1.9.1", "v1.36.3", "v1.37.2"}, s.Versions, "one per module directory, oldest first")
	assert.Equal(t, []string{"autocert", "hostile"}, s.Suites)
	assert.Equal(t, Providers, s.Providers)
}

// fakeSteps runs no suite: each cell's "suite" writes the summary the test gives it.
type fakeSteps struct {
	prepareErr map[string]error          // by "version provider"
	summaries  map[string]report.Summary // by cell
	exitErr    map[string]error
	onPrepare  func(key string)
	onRun      func(Cell)

	mu       sync.Mutex
	prepared []string
}

func (f *fakeSteps) Prepare(_ context.Context, version, provider string, log io.Writer) error {
	key := version + " " + provider
	if f.onPrepare != nil {
		f.onPrepare(key)
	}
	f.mu.Lock()
	f.prepared = append(f.prepared, key)
	f.mu.Unlock()
	_, _ = fmt.Fprintln(log, "preparing")
	return f.prepareErr[key]
}

func (f *fakeSteps) RunSuite(_ context.Context, c Cell, reportsRoot string, log io.Writer) error {
	if f.onRun != nil {
		f.onRun(c)
	}
	_, _ = fmt.Fprintln(log, "running", c)
	if s, ok := f.summaries[c.String()]; ok {
		if err := report.WriteFiles(filepath.Join(reportsRoot, c.Suite), s); err != nil {
			return err
		}
	}
	return f.exitErr[c.String()]
}

func summary(suite string, results ...report.Outcome) report.Summary {
	s := report.Summary{Suite: suite, Provider: "local", KubernetesVersion: "v1.37.2", StartedAt: time.Now(), Seconds: 3}
	for i, r := range results {
		id := fmt.Sprintf("H%d", i+1)
		sc := report.Scenario{ID: id, Title: fmt.Sprintf("%s scenario %d", id, i+1), Result: r, Seconds: 1.5, Details: map[string]any{}}
		if r == report.Failed {
			sc.Details[report.MessageKey] = "expected 413, saw 200\nmore detail"
		}
		s.Scenarios = append(s.Scenarios, sc)
	}
	return s
}

func TestRunKeepsGoingAndReportsEachCell(t *testing.T) {
	plan := Plan{Versions: []string{"v1.37.2"}, Providers: []string{"local", "kind"}, Suites: []string{"autocert", "hostile"}}
	steps := &fakeSteps{
		prepareErr: map[string]error{"v1.37.2 kind": errors.New("hack/kind-host.sh check: exit status 1: ✗ docker run --privileged fails; run make kind-host-setup")},
		summaries: map[string]report.Summary{
			"v1.37.2 local autocert": summary("autocert", report.Passed, report.Passed),
			"v1.37.2 local hostile":  summary("hostile", report.Passed, report.Failed),
		},
		exitErr: map[string]error{"v1.37.2 local hostile": errors.New("exit status 1")},
	}
	out := t.TempDir()
	var progress bytes.Buffer
	res := Run(context.Background(), plan, steps, out, &progress, 1)

	require.Len(t, res.Cells, 4)
	assert.Equal(t, []string{"v1.37.2 local", "v1.37.2 kind"}, steps.prepared, "each version and provider is prepared once")
	byCell := map[string]CellResult{}
	for _, c := range res.Cells {
		byCell[c.String()] = c
	}
	assert.Equal(t, Passed, byCell["v1.37.2 local autocert"].Outcome)
	assert.Equal(t, Failed, byCell["v1.37.2 local hostile"].Outcome)
	assert.Equal(t, "H2: expected 413, saw 200", byCell["v1.37.2 local hostile"].Reason)
	for _, s := range []string{"autocert", "hostile"} {
		c := byCell["v1.37.2 kind "+s]
		assert.Equal(t, NotStarted, c.Outcome, "a cell whose host cannot run kind did not start; it did not fail")
		assert.Contains(t, c.Reason, "cannot start: hack/kind-host.sh check")
	}
	assert.Equal(t, 1, res.Count(Passed))
	assert.Equal(t, 1, res.Count(Failed))
	assert.Equal(t, 2, res.Count(NotStarted))

	lines := progress.String()
	assert.Contains(t, lines, "cell 2/4 v1.37.2 local hostile: failed in")
	assert.Contains(t, lines, "(2 scenarios: 1 passed, 1 failed, 0 skipped) — H2: expected 413, saw 200; so far 2 of 4 ended: 1 passed, 1 failed, 0 not started")
	assert.Contains(t, lines, "cell 4/4 v1.37.2 kind hostile: not started")
	assert.Contains(t, readOutput(t, out, byCell["v1.37.2 local hostile"].Log), "running v1.37.2 local hostile")
}

func TestASuiteThatExitsWithoutASummaryFails(t *testing.T) {
	plan := Plan{Versions: []string{"v1.37.2"}, Providers: []string{"local"}, Suites: []string{"hostile", "autocert"}}
	steps := &fakeSteps{
		summaries: map[string]report.Summary{"v1.37.2 local autocert": summary("autocert", report.Passed)},
		exitErr: map[string]error{
			"v1.37.2 local hostile":  errors.New("exit status 2"),
			"v1.37.2 local autocert": errors.New("exit status 1"),
		},
	}
	res := Run(context.Background(), plan, steps, t.TempDir(), io.Discard, 1)
	assert.Equal(t, Failed, res.Cells[0].Outcome)
	assert.Equal(t, "the suite exited (exit status 2) without a summary.json; see v1.37.2/local/hostile.log", res.Cells[0].Reason)
	assert.Equal(t, Failed, res.Cells[1].Outcome, "a non-zero exit fails the cell even when every scenario passed")
	assert.Contains(t, res.Cells[1].Reason, "every scenario passed, but the suite exited (exit status 1)")
}

func TestAnInterruptLeavesTheRestNotStarted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan := Plan{Versions: []string{"v1.37.2"}, Providers: []string{"local"}, Suites: []string{"autocert", "hostile"}}
	steps := &fakeSteps{onRun: func(Cell) { cancel() }}
	res := Run(ctx, plan, steps, t.TempDir(), io.Discard, 1)
	assert.Equal(t, Failed, res.Cells[0].Outcome)
	assert.Equal(t, "interrupted", res.Cells[0].Reason)
	assert.Equal(t, NotStarted, res.Cells[1].Outcome)
	assert.Equal(t, "interrupted before it started", res.Cells[1].Reason)
}

func TestTheReportsGrid(t *testing.T) {
	plan := Plan{Versions: []string{"v1.37.2"}, Providers: []string{"local", "kind"}, Suites: []string{"hostile"}}
	steps := &fakeSteps{
		prepareErr: map[string]error{"v1.37.2 kind": errors.New("no Docker")},
		summaries:  map[string]report.Summary{"v1.37.2 local hostile": summary("hostile", report.Passed, report.Failed, report.Skipped)},
	}
	out := t.TempDir()
	res := Run(context.Background(), plan, steps, out, io.Discard, 1)
	require.NoError(t, Write(out, res))

	text := readOutput(t, out, ReportFile)
	assert.Contains(t, text, "**2 cells: 0 passed, 1 failed, 1 not started")
	assert.Contains(t, text, "| v1.37.2 local hostile | ❌ failed: H2: expected 413, saw 200 | 1/3 | 0s | [reports](v1.37.2/local/hostile) · [log](v1.37.2/local/hostile.log) |")
	assert.Contains(t, text, "| v1.37.2 kind hostile | ⏸ not started: cannot start: no Docker |  |  | [log](v1.37.2/kind/hostile.log) |")
	assert.Contains(t, text, "| suite | scenario | v1.37.2 local | v1.37.2 kind |")
	assert.Contains(t, text, "| hostile | H1 — scenario 1 | ✅ 1.5s | ⏸ |")
	assert.Contains(t, text, "| hostile | H2 — scenario 2 | ❌ [1.5s](v1.37.2/local/hostile/artifacts) | ⏸ |")
	assert.Contains(t, text, "| hostile | H3 — scenario 3 | ⏭ 1.5s | ⏸ |")
	assert.Contains(t, text, "### v1.37.2 local hostile — H2 scenario 2\n\n[artifacts](v1.37.2/local/hostile/artifacts) · [log](v1.37.2/local/hostile.log)\n\n```\nexpected 413, saw 200\nmore detail\n```")

	assert.Contains(t, readOutput(t, out, ResultFile), `"outcome": "not started"`, "result.json holds every cell")
}

func TestMergeLinksEachPartsReports(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "matrix")
	var parts []string
	for _, provider := range []string{"local", "kind"} {
		part := filepath.Join(root, "parts", "matrix-v1.37.2-"+provider)
		require.NoError(t, os.MkdirAll(part, 0o750))
		plan := Plan{Versions: []string{"v1.37.2"}, Providers: []string{provider}, Suites: []string{"hostile"}}
		steps := &fakeSteps{summaries: map[string]report.Summary{"v1.37.2 " + provider + " hostile": summary("hostile", report.Passed)}}
		require.NoError(t, Write(part, Run(context.Background(), plan, steps, part, io.Discard, 1)))
		parts = append(parts, part)
	}
	res, err := Merge(out, parts)
	require.NoError(t, err)
	require.Len(t, res.Cells, 2)
	assert.Equal(t, "../parts/matrix-v1.37.2-kind/v1.37.2/kind/hostile", res.Cells[1].Reports)
	assert.Equal(t, "../parts/matrix-v1.37.2-kind/v1.37.2/kind/hostile.log", res.Cells[1].Log)
	assert.Equal(t, 2, res.Count(Passed))

	_, err = Merge(out, []string{filepath.Join(root, "nowhere")})
	require.ErrorContains(t, err, "merging matrix results")
}

// readOutput reads a file a matrix run wrote into out.
func readOutput(t *testing.T, out, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, name)) //nolint:gosec // G304: a file the run under test wrote into its temporary directory
	require.NoError(t, err)
	return string(b)
}

func TestSupportedInWithoutVersions(t *testing.T) {
	_, err := SupportedIn(t.TempDir())
	require.ErrorContains(t, err, "no Kubernetes version is supported: hack/tools/k8s holds no <version>/go.mod; add a version the Go module proxy serves with hack/add-k8s-version.sh <version>")
}

// A contended run (-stress N) passes --stress to every cell's suite, says so in the progress
// lines and the report, and keeps its own columns when merged with a calm run.
func TestStressReachesEveryCellAndTheReport(t *testing.T) {
	root := t.TempDir()
	var parts []string
	for _, stress := range []int{0, 2} {
		part := filepath.Join(root, "parts", fmt.Sprintf("stress-%d", stress))
		require.NoError(t, os.MkdirAll(part, 0o750))
		plan := Plan{Versions: []string{"v1.37.2"}, Providers: []string{"local"}, Suites: []string{"autocert", "hostile"}, Stress: stress}
		var ran []Cell
		steps := &fakeSteps{onRun: func(c Cell) { ran = append(ran, c) }, summaries: map[string]report.Summary{}}
		for _, c := range plan.Cells() {
			steps.summaries[c.String()] = summary(c.Suite, report.Passed)
		}
		var progress bytes.Buffer
		res := Run(context.Background(), plan, steps, part, &progress, 1)
		require.NoError(t, Write(part, res))
		for _, c := range ran {
			assert.Equal(t, stress, c.Stress, "cell %s: expected -stress %d passed to its suite", c, stress)
		}
		text := readOutput(t, part, ReportFile)
		if stress == 0 {
			assert.NotContains(t, text, "stress")
		} else {
			assert.Contains(t, progress.String(), "cell 1/2 v1.37.2 local autocert (stress 2): passed")
			assert.Contains(t, text, "\nstress: 2 CPU-bound workers beside every cell\n")
			assert.Contains(t, text, "| suite | scenario | v1.37.2 local (stress 2) |")
			assert.Contains(t, readOutput(t, part, ResultFile), `"stress": 2`)
		}
		parts = append(parts, part)
	}
	res, err := Merge(filepath.Join(root, "matrix"), parts)
	require.NoError(t, err)
	var md bytes.Buffer
	require.NoError(t, RenderMarkdown(&md, res))
	assert.Contains(t, md.String(), "\nstress: the columns marked (stress N) ran beside N CPU-bound workers, the others beside none\n")
	assert.Contains(t, md.String(), "| suite | scenario | v1.37.2 local | v1.37.2 local (stress 2) |")
	assert.Contains(t, md.String(), "| hostile | H1 — scenario 1 | ✅ 1.5s | ✅ 1.5s |")
}

func TestCellsRunAtMostJobsAtOnceEachPreparationOnceAndFirst(t *testing.T) {
	plan := Plan{Versions: []string{"v1.36.3", "v1.37.2"}, Providers: []string{"local"}, Suites: []string{"autocert", "hostile", "certmanager"}}
	var running, most atomic.Int32
	var mu sync.Mutex
	ready := map[string]bool{}
	var early []string
	steps := &fakeSteps{
		summaries: map[string]report.Summary{},
		onPrepare: func(key string) {
			time.Sleep(30 * time.Millisecond) // the other cells of key arrive meanwhile
			mu.Lock()
			ready[key] = true
			mu.Unlock()
		},
		onRun: func(c Cell) {
			mu.Lock()
			if !ready[c.Version+" "+c.Provider] {
				early = append(early, c.String())
			}
			mu.Unlock()
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			running.Add(-1)
		},
	}
	for _, c := range plan.Cells() {
		steps.summaries[c.String()] = summary(c.Suite, report.Passed)
	}
	var progress bytes.Buffer
	res := Run(context.Background(), plan, steps, t.TempDir(), &progress, 3)

	assert.Equal(t, int32(3), most.Load(), "at most 3 cells at once, and 3 when 6 wait")
	assert.Empty(t, early, "these cells ran before their version and provider were prepared")
	assert.ElementsMatch(t, []string{"v1.36.3 local", "v1.37.2 local"}, steps.prepared, "each version and provider is prepared once")
	require.Len(t, res.Cells, 6)
	for i, c := range plan.Cells() {
		assert.Equal(t, c, res.Cells[i].Cell, "results are in the plan's order")
		assert.Equal(t, Passed, res.Cells[i].Outcome, c.String())
	}
	assert.Equal(t, 3, res.Jobs)
	assert.Contains(t, progress.String(), "so far 6 of 6 ended: 6 passed, 0 failed, 0 not started")
	var md bytes.Buffer
	require.NoError(t, RenderMarkdown(&md, res))
	assert.Contains(t, md.String(), "Up to 3 cells ran at once (MATRIX_JOBS)")
}

func TestAnInterruptEndsTheRunningCellsAndStartsNoMore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan := Plan{Versions: []string{"v1.37.2"}, Providers: []string{"local"}, Suites: []string{"autocert", "hostile", "certmanager", "externalcert"}}
	var started sync.WaitGroup
	started.Add(2)
	steps := &fakeSteps{onRun: func(Cell) {
		started.Done()
		started.Wait() // both running cells are in when the interrupt comes
		cancel()
	}}
	res := Run(ctx, plan, steps, t.TempDir(), io.Discard, 2)
	for i, want := range []string{"interrupted", "interrupted", "interrupted before it started", "interrupted before it started"} {
		assert.Equal(t, want, res.Cells[i].Reason, res.Cells[i].String())
	}
	assert.Equal(t, 2, res.Count(Failed))
	assert.Equal(t, 2, res.Count(NotStarted))
}
