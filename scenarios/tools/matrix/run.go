package matrix

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/suiterun"
)

// Outcome is how a cell ended.
type Outcome string

const (
	// Passed: the suite exited 0 and every scenario of its summary passed or was skipped.
	Passed Outcome = "passed"
	// Failed: a scenario failed, or the suite exited non-zero or wrote no summary.
	Failed Outcome = "failed"
	// NotStarted: what the cell needs could not be prepared (no Docker for kind, a control
	// plane that does not build), or the run was interrupted first. Not a scenario failure.
	NotStarted Outcome = "not started"
)

// CellResult is what one cell did.
type CellResult struct {
	Cell
	Outcome Outcome `json:"outcome"`
	// Reason is the first line of what went wrong: the failed scenario's message, the suite's
	// exit, or why the cell did not start.
	Reason  string  `json:"reason,omitempty"`
	Seconds float64 `json:"seconds"`
	// Reports is the directory, relative to the matrix output, holding the suite's
	// summary.json, junit.xml and artifacts/; Log the suite's output, relative too.
	Reports string `json:"reports,omitempty"`
	Log     string `json:"log,omitempty"`
	// Summary is the suite's summary.json, when it wrote one.
	Summary *report.Summary `json:"summary,omitempty"`
}

// Result is a whole matrix run.
type Result struct {
	StartedAt time.Time `json:"startedAt"`
	Seconds   float64   `json:"seconds"`
	// Jobs is how many cells ran at once, at most (MATRIX_JOBS): cells sharing the machine
	// take longer than alone. A merged report keeps the largest of its parts'.
	Jobs  int          `json:"jobs,omitempty"`
	Cells []CellResult `json:"cells"`
}

// reasonWidth bounds the one line a cell quotes of a failure (its first line).
const reasonWidth = 240

// Count is how many cells ended with o.
func (r Result) Count(o Outcome) int {
	n := 0
	for _, c := range r.Cells {
		if c.Outcome == o {
			n++
		}
	}
	return n
}

// Steps are what running a cell takes: the command's are real (Commands), tests fake them.
type Steps interface {
	// Prepare makes what the cells of version on provider need: control-plane binaries, the
	// kind node image, a host that runs kind's privileged nodes. An error means those cells
	// cannot start.
	Prepare(ctx context.Context, version, provider string, log io.Writer) error
	// RunSuite runs the cell's suite with its reports written to reportsRoot/<suite>. Its
	// error is the suite's exit (the summary says which scenarios failed).
	RunSuite(ctx context.Context, c Cell, reportsRoot string, log io.Writer) error
}

// Run runs every cell of plan into out (out/<version>/<provider>/<suite>/ and <suite>.log
// beside it), at most jobs at once (below 1: one), in the plan's order; keeps going past a
// failed cell; and reports progress — each cell as it starts and ends, the time since the
// start, the outcomes so far — on progress. Each version and provider is prepared once, before
// the first of its cells runs; its other cells wait for that. An interrupt (ctx) ends the
// running cells (each suite deletes its cluster) and leaves the rest not started.
func Run(ctx context.Context, plan Plan, steps Steps, out string, progress io.Writer, jobs int) Result {
	start := time.Now()
	res := Result{StartedAt: start.UTC(), Jobs: max(1, jobs)}
	var mu sync.Mutex // guards res.Cells and progress
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprintf(progress, "[%7s] %s\n", time.Since(start).Round(time.Second), fmt.Sprintf(format, args...))
	}
	cells := plan.Cells()
	res.Cells = make([]CellResult, len(cells))
	ended := 0
	prep := &preparations{steps: steps, done: map[string]*preparation{}}
	notStarted := suiterun.EachAtMost(ctx, len(cells), res.Jobs, func(i int) {
		c := cells[i]
		say("cell %d/%d %s …", i+1, len(cells), c)
		r := runCell(ctx, c, steps, out, prep, say)
		line := fmt.Sprintf("cell %d/%d %s: %s", i+1, len(cells), c, r.Outcome)
		if r.Outcome != NotStarted {
			line += " in " + duration(r.Seconds)
		}
		if r.Summary != nil {
			n := r.Summary.Counts()
			line += fmt.Sprintf(" (%d scenarios: %d passed, %d failed, %d skipped)", n.Total(), n.Passed, n.Failed, n.Skipped)
		}
		if r.Reason != "" && r.Outcome != Passed {
			line += " — " + r.Reason
		}
		mu.Lock()
		res.Cells[i] = r
		ended++
		so := fmt.Sprintf("%d of %d ended: %d passed, %d failed, %d not started", ended, len(cells), res.Count(Passed), res.Count(Failed), res.Count(NotStarted))
		mu.Unlock()
		say("%s; so far %s", line, so)
	})
	for _, i := range notStarted {
		res.Cells[i] = CellResult{Cell: cells[i], Outcome: NotStarted, Reason: "interrupted before it started"}
	}
	res.Seconds = time.Since(start).Seconds()
	return res
}

// preparations prepares each version and provider once, for every cell that needs it: the
// first cell of a key prepares it, the others wait for that and share its outcome.
type preparations struct {
	steps Steps
	mu    sync.Mutex
	done  map[string]*preparation
}

type preparation struct {
	once sync.Once
	err  error
}

// of prepares what cells of version on provider need, once, saying so on say; its log is the
// log of the cell that prepares it.
func (p *preparations) of(ctx context.Context, version, provider string, log io.Writer, say func(string, ...any)) error {
	key := version + " " + provider // cells of another stress need the same preparation
	p.mu.Lock()
	got, ok := p.done[key]
	if !ok {
		got = &preparation{}
		p.done[key] = got
	}
	p.mu.Unlock()
	got.once.Do(func() {
		say("preparing %s …", key)
		got.err = p.steps.Prepare(ctx, version, provider, log)
	})
	return got.err
}

func runCell(ctx context.Context, c Cell, steps Steps, out string, prep *preparations, say func(string, ...any)) CellResult {
	r := CellResult{Cell: c, Outcome: NotStarted}
	if err := ctx.Err(); err != nil {
		r.Reason = "interrupted before it started"
		return r
	}
	rel := filepath.Join(c.Version, c.Provider)
	dir := filepath.Join(out, rel)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		r.Reason = err.Error()
		return r
	}
	r.Log = filepath.Join(rel, c.Suite+".log")
	logFile, err := os.Create(filepath.Join(out, r.Log)) //nolint:gosec // G304: the cell's log, in the output directory the caller chose
	if err != nil {
		r.Reason = err.Error()
		return r
	}
	defer func() { _ = logFile.Close() }() // written through; a lost log line is not worth failing the cell

	if perr := prep.of(ctx, c.Version, c.Provider, logFile, say); perr != nil {
		r.Reason = "cannot start: " + report.FirstLine(perr.Error(), reasonWidth)
		return r
	}

	start := time.Now()
	runErr := steps.RunSuite(ctx, c, dir, logFile)
	r.Seconds = time.Since(start).Seconds()
	r.Reports = filepath.Join(rel, c.Suite)
	if ctx.Err() != nil {
		r.Outcome, r.Reason = Failed, "interrupted"
		return r
	}
	sum, readErr := report.ReadSummary(filepath.Join(out, r.Reports, report.SummaryFile))
	if readErr == nil {
		r.Summary = &sum
	}
	r.Outcome, r.Reason = judge(r.Summary, runErr, readErr, r.Log)
	return r
}

// judge decides a run's outcome from its summary and exit.
func judge(sum *report.Summary, runErr, readErr error, log string) (Outcome, string) {
	if sum == nil {
		reason := "no summary.json: " + report.FirstLine(readErr.Error(), reasonWidth)
		if runErr != nil {
			reason = "the suite exited (" + runErr.Error() + ") without a summary.json; see " + log
		}
		return Failed, reason
	}
	for _, sc := range sum.Scenarios {
		if sc.Result == report.Failed {
			return Failed, sc.ID + ": " + report.FirstLine(sc.Message(), reasonWidth)
		}
	}
	if runErr != nil {
		return Failed, "every scenario passed, but the suite exited (" + runErr.Error() + "); see " + log
	}
	return Passed, ""
}
