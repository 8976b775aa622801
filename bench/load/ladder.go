// Package load drives the webhook benchmarks with vegeta: constant-rate
// attacks of AdmissionReview requests straight at the operator (Admission) and
// of server-side dry-run creates through the API server (DryRun), each answer
// checked for the verdict its request deserved, run as rate ladders with an
// uncounted warm-up per rate, and the servers' own latency histograms scraped
// around every measured window (Probe).
package load

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/gauntlet-dev/gauntlet/bench/result"
)

// Workload is one kind of request a ladder sends at rising rates.
type Workload struct {
	// Spec names the ladder; its Rate is ignored (each step sets its own).
	Spec result.StepSpec
	// Client carries the requests. Every step's attacker shares it, so
	// keep-alive connections survive from warm-up to measurement and from one
	// rate to the next.
	Client *http.Client
	// Target fills in the next request; it must be safe for concurrent use.
	Target vegeta.Targeter
	// Check judges every answer; an error marks the request failed, nil makes
	// it a success whatever its status code. Transport errors are failures
	// without a check.
	Check func(*vegeta.Result) error
	// Probes are scraped before and after each measured attack.
	Probes []Probe
}

// StepOptions say how long a step runs.
type StepOptions struct {
	// Warmup runs at the step's rate before the measurement and is not
	// counted: it fills connection pools and caches and lets the Go runtime
	// grow its heap.
	Warmup time.Duration
	// Duration is the measured attack's length.
	Duration time.Duration
	// Windows is how many equal time slices the measured attack is cut into
	// (result.Window); below 1 means one.
	Windows int
}

// Progress prints timestamped lines (elapsed since Start) to W; a nil W
// prints nothing.
type Progress struct {
	W     io.Writer
	Start time.Time
}

func (p Progress) Printf(format string, args ...any) {
	if p.W == nil {
		return
	}
	el := time.Since(p.Start).Round(time.Second)
	// Progress is best effort: a failed write to the terminal must not fail a measurement.
	_, _ = fmt.Fprintf(p.W, "[%02d:%02d] %s\n", int(el.Minutes()), int(el.Seconds())%60, fmt.Sprintf(format, args...))
}

// RunStep attacks w at rate req/s: the warm-up, then the measured attack with
// the probes scraped around it. A failed scrape fails the step: a result
// claiming server-side numbers it does not have would mislead.
func RunStep(ctx context.Context, w Workload, rate float64, opts StepOptions, progress Progress) (result.Step, error) {
	spec, err := stepSpec(w, rate, opts)
	if err != nil {
		return result.Step{}, err
	}
	progress.Printf("%s @ %g req/s: warm-up %s, then measuring %s …", spec.Name, rate, opts.Warmup, opts.Duration)
	p, err := measurePart(ctx, w, spec, opts, nil)
	if err != nil {
		return result.Step{}, err
	}
	step := p.outcome.step(spec)
	step.ServerHistograms = p.serverHistograms()
	progress.Printf("%s", stepLine(step, ""))
	return step, nil
}

// stepSpec is w's spec at rate, once rate and opts are known to be measurable.
func stepSpec(w Workload, rate float64, opts StepOptions) (result.StepSpec, error) {
	spec := w.Spec
	spec.Rate = rate
	if rate < 1 || rate != math.Trunc(rate) {
		return spec, fmt.Errorf("step %s: rate %v must be a whole number of requests per second", spec.Key(), rate)
	}
	if opts.Duration <= 0 {
		return spec, fmt.Errorf("step %s: duration %v must be positive", spec.Key(), opts.Duration)
	}
	return spec, nil
}

// part is one measured attack with the probes' scrapes around it.
type part struct {
	outcome       attackOutcome
	before, after []Snapshot
}

// measurePart runs the warm-up and then the measured attack of opts at
// spec.Rate, scraping w's probes before and after the measured attack. Every
// measured result is also added to merged when it is not nil.
func measurePart(ctx context.Context, w Workload, spec result.StepSpec, opts StepOptions, merged *vegeta.Metrics) (part, error) {
	if opts.Warmup > 0 {
		warm := attack(ctx, w, spec.Rate, opts.Warmup, 1, spec.Name+"/warmup", nil)
		if err := ctx.Err(); err != nil {
			return part{}, fmt.Errorf("step %s: %w", spec.Key(), err)
		}
		if warm.metrics.Requests > 0 && warm.succeeded == 0 {
			return part{}, fmt.Errorf("step %s: every warm-up request failed, e.g. %s", spec.Key(), firstError(warm.metrics))
		}
	}
	scrape := func() ([]Snapshot, error) {
		snaps := make([]Snapshot, len(w.Probes))
		for i, p := range w.Probes {
			s, err := p.Scrape(ctx)
			if err != nil {
				return nil, fmt.Errorf("step %s: %w", spec.Key(), err)
			}
			snaps[i] = s
		}
		return snaps, nil
	}
	before, err := scrape()
	if err != nil {
		return part{}, err
	}
	measured := attack(ctx, w, spec.Rate, opts.Duration, opts.Windows, spec.Name, merged)
	if err := ctx.Err(); err != nil {
		return part{}, fmt.Errorf("step %s: %w", spec.Key(), err)
	}
	after, err := scrape()
	if err != nil {
		return part{}, err
	}
	return part{outcome: measured, before: before, after: after}, nil
}

// serverHistograms is what the probes observed during the part.
func (p part) serverHistograms() []result.ServerHistogram {
	return SinceParts([][]Snapshot{p.before}, [][]Snapshot{p.after})
}

// stepLine is the progress line of a measured step; label, when set, says
// which side it measured.
func stepLine(step result.Step, label string) string {
	line := fmt.Sprintf("%s%s @ %g req/s: p50 %.3f ms  p99 %.3f ms  max %.2f ms  success %.2f%%  %d requests (achieved %.0f req/s)",
		step.Name, label, step.Rate, step.P50Ms, step.P99Ms, step.MaxMs, step.SuccessRatio*100, step.Requests, step.AchievedRate)
	if l, ok := result.ReadLoadAverage(); ok {
		line += fmt.Sprintf("  [load %.1f]", l)
	}
	if step.SuccessRatio < 1 && len(step.Errors) > 0 {
		line += "; first error: " + step.Errors[0]
	}
	return line
}

// attack runs one constant-rate vegeta attack, every answer judged by w.Check,
// and returns what it measured, cut into windows too. A request succeeds when
// it got an answer its check accepted, whatever the status code. Cancelling
// ctx stops the attack early. Every result is also added to merged when it is
// not nil: the metrics of a step measured in several parts (RunTurns).
func attack(ctx context.Context, w Workload, rate float64, d time.Duration, windows int, name string, merged *vegeta.Metrics) attackOutcome {
	atk := vegeta.NewAttacker(vegeta.Client(w.Client), vegeta.MaxBody(1<<20))
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()
	pacer := vegeta.ConstantPacer{Freq: int(rate), Per: time.Second}
	m := &vegeta.Metrics{}
	rec := result.NewWindowRecorder(time.Now(), d, max(1, windows))
	succeeded := 0
	for res := range atk.Attack(w.Target, pacer, d, name) {
		// Code 0 is a transport error; any answer goes to the check, which
		// replaces vegeta's verdict (an error for every status ≥ 400).
		if res.Code != 0 && w.Check != nil {
			res.Error = ""
			if err := w.Check(res); err != nil {
				// Code 0 marks the request as answered unusably; the error says
				// what was wrong with the answer.
				res.Code = 0
				res.Error = err.Error()
			}
		}
		if res.Error == "" {
			succeeded++
		}
		res.Body = nil
		rec.Add(res.Timestamp, res.Latency)
		m.Add(res)
		if merged != nil {
			merged.Add(res)
		}
	}
	m.Close()
	return attackOutcome{m, rec.Windows(), succeeded}
}

// attackOutcome is what one attack measured.
type attackOutcome struct {
	metrics *vegeta.Metrics
	windows []result.Window
	// succeeded counts the requests whose answer the check accepted.
	succeeded int
}

// step turns the outcome into a result step whose success ratio and
// throughput count the checked successes, not vegeta's 2xx and 3xx answers.
func (o attackOutcome) step(spec result.StepSpec) result.Step {
	s := result.FromMetrics(spec, o.metrics)
	s.Windows = o.windows
	if s.Requests > 0 {
		s.SuccessRatio = float64(o.succeeded) / float64(s.Requests)
	}
	if secs := (o.metrics.Duration + o.metrics.Wait).Seconds(); secs > 0 {
		s.Throughput = float64(o.succeeded) / secs
	}
	return s
}

func firstError(m *vegeta.Metrics) string {
	if len(m.Errors) == 0 {
		return "(no error message)"
	}
	return m.Errors[0]
}
