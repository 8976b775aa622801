package result

import (
	"fmt"
	"math"
	"strings"

	"github.com/aclements/go-moremath/stats"
)

// Default tolerances for Compare. Absolute timings drift between machines and
// runs, so p99 and p50 are judged as ratios of the baseline; the noise floors
// keep sub-millisecond webhook latencies, where a large swing is a few hundred
// microseconds of scheduler jitter on a 2-core machine, from failing the
// comparison. The p99 ratio is wide because a whole run can sit higher than
// another: two default runs of the same code on an otherwise idle 2-core VM
// differed by −36 % … +60 % in p99 (every window of the +60 % step higher,
// at 2,000 req/s), while an injected +5 ms moves p99 by +300 % or more.
//
// Three more defences against a noisy machine, all within one run: a step is
// judged relative to its control ladder measured beside it (a machine busier
// than at the baseline slows both), by the median of its windows' percentiles
// (a stall lands in one or two windows, a slower webhook in all), and only
// when a rank test over those windows finds the shift significant. p50 is
// checked besides p99 because a slowdown of the webhook itself moves both,
// while other work on the machine mostly moves the tail.
const (
	// DefaultP99Ratio allows p99 to double over the baseline.
	DefaultP99Ratio = 1
	// DefaultP99FloorMs ignores p99 increases of 0.5 ms or less, whatever
	// the ratio.
	DefaultP99FloorMs = 0.5
	// DefaultP50Ratio allows p50 to grow by 50 % over the baseline.
	DefaultP50Ratio = 0.5
	// DefaultP50FloorMs ignores p50 increases of 0.5 ms or less.
	DefaultP50FloorMs = 0.5
	// DefaultSuccessDrop allows the success ratio to fall by 0.001 (0.1
	// percentage points) below the baseline.
	DefaultSuccessDrop = 0.001
	// DefaultAlpha is the significance a latency shift must reach: a
	// one-sided Mann-Whitney U test over the steps' windows must find it
	// this unlikely (p < 0.05) to be chance.
	DefaultAlpha = 0.05
)

// Tolerances says how much worse a run may be than its baseline. A zero
// value means no tolerance at all; start from DefaultTolerances.
type Tolerances struct {
	// P99Ratio is the allowed relative p99 increase (1 = +100 %).
	P99Ratio float64 `json:"p99Ratio"`
	// P99FloorMs is the absolute p99 increase, in milliseconds, that is never
	// a regression: both the ratio and this floor must be exceeded.
	P99FloorMs float64 `json:"p99FloorMs"`
	// P50Ratio and P50FloorMs are the same for the median.
	P50Ratio   float64 `json:"p50Ratio"`
	P50FloorMs float64 `json:"p50FloorMs"`
	// SuccessDrop is the allowed absolute drop of the success ratio
	// (0.001 = 0.1 percentage points).
	SuccessDrop float64 `json:"successDrop"`
	// Alpha is the significance level of the rank test a p99 or p50 shift
	// must also pass (see Compare); 1 turns the test off.
	Alpha float64 `json:"alpha"`
}

// DefaultTolerances returns p99 +100 % (beyond a 0.5 ms noise floor), p50
// +50 % (beyond 0.5 ms), both significant at p < 0.05, and a success-ratio
// drop of 0.1 percentage points.
func DefaultTolerances() Tolerances {
	return Tolerances{P99Ratio: DefaultP99Ratio, P99FloorMs: DefaultP99FloorMs,
		P50Ratio: DefaultP50Ratio, P50FloorMs: DefaultP50FloorMs, SuccessDrop: DefaultSuccessDrop, Alpha: DefaultAlpha}
}

// Verdict is the outcome of comparing one step with its baseline.
type Verdict string

const (
	// Pass: within tolerances.
	Pass Verdict = "pass"
	// Improved: p99 fell by more than the tolerances allow it to rise;
	// informational, worth a new baseline.
	Improved Verdict = "improved"
	// Regressed: p99, p50 or the success ratio is worse than the tolerances
	// allow.
	Regressed Verdict = "regressed"
	// Missing: the baseline measured this step and the current run did not,
	// so nothing proves it did not regress (a rate ladder that stopped early
	// is usually the reason).
	Missing Verdict = "missing"
	// New: only the current run measured this step; there is nothing to
	// compare with.
	New Verdict = "new"
)

// Failing reports whether the verdict should fail `make bench-compare`.
func (v Verdict) Failing() bool { return v == Regressed || v == Missing }

// StepComparison is one step matched by name and rate.
type StepComparison struct {
	Name string  `json:"name"`
	Mode Mode    `json:"mode"`
	Rate float64 `json:"rate"`
	// Base and Current are nil when the step is missing from that side.
	Base    *Step `json:"base,omitempty"`
	Current *Step `json:"current,omitempty"`
	// P99 and P50 are the two percentiles as judged; nil for missing and
	// new steps.
	P99 *Shift `json:"p99,omitempty"`
	P50 *Shift `json:"p50,omitempty"`
	// SuccessDelta is current success ratio − base success ratio.
	SuccessDelta float64 `json:"successDelta"`
	Verdict      Verdict `json:"verdict"`
	// Reason explains the verdict with the numbers that decided it.
	Reason string `json:"reason"`
}

// Shift is how one percentile of a step moved from the baseline to the
// current run.
type Shift struct {
	// BaseMs is the baseline's value: the median of its windows' percentiles.
	BaseMs float64 `json:"baseMs"`
	// MeasuredMs is the current run's value, measured the same way.
	MeasuredMs float64 `json:"measuredMs"`
	// Control names the control ladder both runs measured beside this step;
	// empty when they did not (or the step is a control itself).
	Control string `json:"control,omitempty"`
	// MachineFactor is the control's value in the current run over its value
	// in the baseline (1.3: the machine answered the control 30 % slower).
	MachineFactor float64 `json:"machineFactor"`
	// CurrentMs is MeasuredMs divided by MachineFactor: the current run on the
	// baseline's machine. Ratio and DeltaMs compare it with BaseMs.
	CurrentMs float64 `json:"currentMs"`
	Ratio     float64 `json:"ratio"`
	DeltaMs   float64 `json:"deltaMs"`
	// PGreater and PLess are one-sided Mann-Whitney U test p-values that the
	// current windows (scaled by MachineFactor) lie above, or below, the
	// baseline's; both are 0 when the windows are too few for the test to
	// reach the tolerance's alpha, and it is not applied.
	PGreater float64 `json:"pGreater"`
	PLess    float64 `json:"pLess"`
	Windows  [2]int  `json:"windows"`
	// Pairs, when not zero, says the p-values come from a sign test over
	// this many pairs of windows measured side by side (CompareAB), not from
	// the U test.
	Pairs int `json:"pairs,omitempty"`
	// Segments, on a step of an A/B run, are each side's median window value
	// in each of the step's segment pairs (A's k-th segment and B's k-th ran
	// next to each other): Segments[k] = {A, B}. A growth counts only when it
	// shows in most of them (see inMostSegments): a slower side is slower all
	// along, a stall of the machine hits a few segments.
	Segments [][2]float64 `json:"segments,omitempty"`
	// Tests, when above 1, is how many tests of this percentile the run
	// judged together, and QGreater and QLess are PGreater and PLess adjusted
	// for them (Benjamini–Hochberg, CompareAB): an A/B run makes one test per
	// step, and at p < 0.05 each, one of twenty steps of two identical sides
	// would look slower by chance.
	Tests    int     `json:"tests,omitempty"`
	QGreater float64 `json:"qGreater,omitempty"`
	QLess    float64 `json:"qLess,omitempty"`
}

// Tested reports whether the rank test was applied.
func (s Shift) Tested() bool { return s.PGreater > 0 }

// adjusted reports whether the run's tests were adjusted together
// (CompareAB): then QGreater and QLess, not PGreater and PLess, decide.
func (s Shift) adjusted() bool { return s.Tests > 1 }

// growthP is the p-value a growth is judged by: QGreater when adjusted, the
// test's own otherwise.
func (s Shift) growthP() float64 {
	if s.adjusted() {
		return s.QGreater
	}
	return s.PGreater
}

// dropP is the same for a drop.
func (s Shift) dropP() float64 {
	if s.adjusted() {
		return s.QLess
	}
	return s.PLess
}

// pName is the name of the p-value growthP and dropP give: "q" when adjusted.
func (s Shift) pName() string {
	if s.adjusted() {
		return "q"
	}
	return "p"
}

// Comparison is a run judged against a baseline.
type Comparison struct {
	// AB says the two sides were measured in one run, interleaved
	// (CompareAB): Base is side A, Current side B.
	AB              bool    `json:"ab,omitempty"`
	BaseRun         string  `json:"baseRun"`
	BaseRevision    string  `json:"baseRevision"`
	BaseMachine     Machine `json:"baseMachine"`
	CurrentRun      string  `json:"currentRun"`
	CurrentRevision string  `json:"currentRevision"`
	CurrentMachine  Machine `json:"currentMachine"`
	// BaseTarget and CurrentTarget are Result.Target of each side: what each
	// measured when it is not gauntlet's own operator.
	BaseTarget    string     `json:"baseTarget,omitempty"`
	CurrentTarget string     `json:"currentTarget,omitempty"`
	Tolerances    Tolerances `json:"tolerances"`
	// Steps follow the baseline's order; steps only the current run has come
	// last, in its order.
	Steps []StepComparison `json:"steps"`
}

// Failed reports whether any step regressed or went missing.
func (c Comparison) Failed() bool {
	for _, s := range c.Steps {
		if s.Verdict.Failing() {
			return true
		}
	}
	return false
}

// Count returns how many steps have verdict v.
func (c Comparison) Count(v Verdict) int {
	n := 0
	for _, s := range c.Steps {
		if s.Verdict == v {
			n++
		}
	}
	return n
}

// Compare judges current against base (the regression report, catalog P6). Steps are
// matched by name and rate.
// Each step's p99 and p50 are judged as a Shift: the median over the step's
// windows, the current run's scaled by how much slower (or faster) its control
// ladder answered than the baseline's at the same rate. A step regresses when
//
//   - its p99 grew by more than P99Ratio and more than P99FloorMs (both: a
//     large ratio of a tiny number is noise, a large absolute jump on a slow
//     path may still be within the ratio), and a one-sided Mann-Whitney U test
//     over the windows puts the growth below Alpha (when the windows are too
//     few for the test to ever reach Alpha, it is skipped);
//   - its p50 did the same with P50Ratio and P50FloorMs; or
//   - its success ratio fell more than SuccessDrop below the baseline's.
//
// Control ladders are judged on their success ratio only: their latency is
// the machine's, reported as the MachineFactor of the steps they control.
// Baseline steps the current run lacks are Missing (failing); steps only the
// current run has are New (not failing).
func Compare(base, current Result, tol Tolerances) Comparison {
	c := Comparison{
		BaseRun: base.Run, BaseRevision: base.GitRevision, BaseMachine: base.Machine,
		CurrentRun: current.Run, CurrentRevision: current.GitRevision, CurrentMachine: current.Machine,
		Tolerances: tol,
	}
	// Queues per key keep the matching total even for a malformed result that
	// repeats a key: the n-th occurrence meets the n-th occurrence.
	pending := map[string][]int{}
	for i, s := range current.Steps {
		pending[s.Key()] = append(pending[s.Key()], i)
	}
	matched := make([]bool, len(current.Steps))
	for i := range base.Steps {
		b := base.Steps[i]
		q := pending[b.Key()]
		if len(q) == 0 {
			c.Steps = append(c.Steps, StepComparison{
				Name: b.Name, Mode: b.Mode, Rate: b.Rate, Base: &b, Verdict: Missing,
				Reason: fmt.Sprintf("measured in the baseline (p99 %s) but not in this run", fmtMs(b.P99Ms)),
			})
			continue
		}
		pending[b.Key()] = q[1:]
		matched[q[0]] = true
		cur := current.Steps[q[0]]
		bc, okb := base.ControlOf(b)
		cc, okc := current.ControlOf(cur)
		if !okb || !okc {
			bc, cc = Step{}, Step{}
		}
		c.Steps = append(c.Steps, compareStep(b, cur, bc, cc, base.isControl(b.Name), tol))
	}
	for i := range current.Steps {
		if matched[i] {
			continue
		}
		s := current.Steps[i]
		c.Steps = append(c.Steps, StepComparison{
			Name: s.Name, Mode: s.Mode, Rate: s.Rate, Current: &s, Verdict: New,
			Reason: fmt.Sprintf("not in the baseline (p99 %s); nothing to compare", fmtMs(s.P99Ms)),
		})
	}
	return c
}

// isControl reports whether some ladder of r names ladder name as its control.
func (r Result) isControl(name string) bool {
	for _, s := range r.Steps {
		if s.Control == name {
			return true
		}
	}
	return false
}

// shiftOf measures how one percentile moved; of picks it from a step's
// windows. baseCtl and curCtl are the steps' controls (zero Steps: none).
func shiftOf(b, cur, baseCtl, curCtl Step, of func(Step) []float64, alpha float64) *Shift {
	// of returns a fresh slice, so the current windows can be scaled in place.
	bw, cw := of(b), of(cur)
	sh := &Shift{BaseMs: median(bw), MeasuredMs: median(cw), MachineFactor: 1}
	if baseCtl.Name != "" {
		if bm, cm := median(of(baseCtl)), median(of(curCtl)); bm > 0 && cm > 0 {
			sh.Control, sh.MachineFactor = baseCtl.Name, cm/bm
		}
	}
	sh.CurrentMs = sh.MeasuredMs / sh.MachineFactor
	sh.DeltaMs = sh.CurrentMs - sh.BaseMs
	if sh.BaseMs > 0 {
		sh.Ratio = sh.CurrentMs / sh.BaseMs
	}
	for i := range cw {
		cw[i] /= sh.MachineFactor
	}
	sh.Windows = [2]int{len(bw), len(cw)}
	sh.PGreater, sh.PLess = uTest(bw, cw, alpha)
	return sh
}

// uTest gives the one-sided Mann-Whitney U test p-values that cur lies above,
// and below, base; both are 0 (not tested) when the samples are too few for
// the test to ever reach alpha.
func uTest(base, cur []float64, alpha float64) (pGreater, pLess float64) {
	if minOneSidedP(len(base), len(cur)) >= alpha {
		return 0, 0
	}
	greater, err1 := stats.MannWhitneyUTest(cur, base, stats.LocationGreater)
	less, err2 := stats.MannWhitneyUTest(cur, base, stats.LocationLess)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	// A p-value of exactly 0 would read as "not tested".
	return math.Max(greater.P, math.SmallestNonzeroFloat64), math.Max(less.P, math.SmallestNonzeroFloat64)
}

// minOneSidedP is the smallest p-value a one-sided U test of n1 against n2
// distinct values can give: one ordering out of C(n1+n2, n1).
func minOneSidedP(n1, n2 int) float64 {
	p := 1.0
	for i := 1; i <= n1; i++ {
		p *= float64(i) / float64(n2+i)
	}
	return p
}

// grew reports whether sh rose beyond ratio and floor, significantly, and in
// most of its segments.
func (sh Shift) grew(ratio, floorMs, alpha float64) bool {
	return sh.CurrentMs > sh.BaseMs*(1+ratio) && sh.DeltaMs > floorMs && (!sh.Tested() || sh.growthP() < alpha) &&
		sh.inMostSegments(ratio, floorMs)
}

// SegmentsGrownShare is the share of an A/B step's segment pairs (rounded
// up) in which a growth must show to count: with 4 segments per side, 3, so
// one segment of a side meeting a stall of the machine is not a slower side;
// with 2, both.
const SegmentsGrownShare = 0.75

// segmentsNeeded is how many of n segment pairs a growth must show in.
func segmentsNeeded(n int) int { return int(math.Ceil(SegmentsGrownShare * float64(n))) }

// inMostSegments reports whether sh rose beyond ratio and floor in at least
// segmentsNeeded of its segments (none: true).
func (sh Shift) inMostSegments(ratio, floorMs float64) bool {
	return sh.segmentsGrown(ratio, floorMs) >= segmentsNeeded(len(sh.Segments))
}

// segmentsGrown is how many of sh's segments rose beyond ratio and floor.
func (sh Shift) segmentsGrown(ratio, floorMs float64) int {
	n := 0
	for _, seg := range sh.Segments {
		if seg[1] > seg[0]*(1+ratio) && seg[1]-seg[0] > floorMs {
			n++
		}
	}
	return n
}

// fell reports whether sh dropped beyond ratio and floor, significantly.
func (sh Shift) fell(ratio, floorMs, alpha float64) bool {
	return sh.CurrentMs*(1+ratio) < sh.BaseMs && -sh.DeltaMs > floorMs && (!sh.Tested() || sh.dropP() < alpha)
}

// describe is "p99 0.900 ms → 5.90 ms (+556%, +5.00 ms)", followed, when they
// applied, by the control scaling and the rank test's p-value for the
// direction in question (growth unless falling).
func (sh Shift) describe(label string, falling bool) string {
	s := fmt.Sprintf("%s %s → %s (%s, %s)", label, fmtMs(sh.BaseMs), fmtMs(sh.CurrentMs),
		fmtPercentChange(sh.BaseMs, sh.CurrentMs), fmtSignedMs(sh.DeltaMs))
	var notes []string
	if sh.Control != "" {
		notes = append(notes, fmt.Sprintf("measured %s; %s ×%.2f", fmtMs(sh.MeasuredMs), sh.Control, sh.MachineFactor))
	}
	if sh.Tested() {
		p := sh.PGreater
		if falling {
			p = sh.PLess
		}
		if sh.Pairs > 0 {
			notes = append(notes, fmt.Sprintf("sign test p=%.3g over %d window pairs", p, sh.Pairs))
		} else {
			notes = append(notes, fmt.Sprintf("U test p=%.3g over %d+%d windows", p, sh.Windows[0], sh.Windows[1]))
		}
		if sh.adjusted() {
			q := sh.growthP()
			if falling {
				q = sh.dropP()
			}
			notes = append(notes, fmt.Sprintf("q=%.3g adjusted for the run's %d tests", q, sh.Tests))
		}
	}
	if len(notes) > 0 {
		s += " [" + strings.Join(notes, "; ") + "]"
	}
	return s
}

// describeSegments is "segments 1.00 ms → 4.00 ms, 1.00 ms → 1.10 ms, …".
func (sh Shift) describeSegments() string {
	parts := make([]string, len(sh.Segments))
	for i, seg := range sh.Segments {
		parts[i] = fmt.Sprintf("%s → %s", fmtMs(seg[0]), fmtMs(seg[1]))
	}
	return "segments " + strings.Join(parts, ", ")
}

func compareStep(b, cur, baseCtl, curCtl Step, control bool, tol Tolerances) StepComparison {
	return judge(b, cur, shiftOf(b, cur, baseCtl, curCtl, Step.WindowP99s, tol.Alpha),
		shiftOf(b, cur, baseCtl, curCtl, Step.WindowP50s, tol.Alpha), control, tol)
}

// judge gives the verdict on cur against b from the two percentiles' shifts
// and the success ratios (see Compare).
func judge(b, cur Step, p99Shift, p50Shift *Shift, control bool, tol Tolerances) StepComparison {
	sc := StepComparison{
		Name: b.Name, Mode: b.Mode, Rate: b.Rate, Base: &b, Current: &cur,
		P99: p99Shift, P50: p50Shift, SuccessDelta: cur.SuccessRatio - b.SuccessRatio,
	}
	p99, p50 := *sc.P99, *sc.P50
	success := fmt.Sprintf("success %s → %s", fmtRatio(b.SuccessRatio), fmtRatio(cur.SuccessRatio))
	// Compare with a small epsilon so 1 − 0.001 computed in floating point does
	// not flag a drop of exactly the tolerance.
	successRegressed := cur.SuccessRatio < b.SuccessRatio-tol.SuccessDrop-1e-12

	var reasons []string
	if !control && p99.grew(tol.P99Ratio, tol.P99FloorMs, tol.Alpha) {
		reasons = append(reasons, fmt.Sprintf("%s exceeds +%s and the %s noise floor", p99.describe("p99", false), fmtPercent(tol.P99Ratio), fmtMs(tol.P99FloorMs)))
	}
	if !control && p50.grew(tol.P50Ratio, tol.P50FloorMs, tol.Alpha) {
		reasons = append(reasons, fmt.Sprintf("%s exceeds +%s and the %s noise floor", p50.describe("p50", false), fmtPercent(tol.P50Ratio), fmtMs(tol.P50FloorMs)))
	}
	if successRegressed {
		reasons = append(reasons, fmt.Sprintf("%s dropped by %s points, more than the %s allowed",
			success, fmtPoints(-sc.SuccessDelta), fmtPoints(tol.SuccessDrop)))
	}
	aboveRatio := p99.CurrentMs > p99.BaseMs*(1+tol.P99Ratio)
	switch {
	case len(reasons) > 0:
		sc.Verdict = Regressed
		sc.Reason = strings.Join(reasons, "; ")
	case control:
		sc.Verdict = Pass
		sc.Reason = fmt.Sprintf("control: latency is the machine's, not judged (p99 %s → %s, p50 %s → %s); %s",
			fmtMs(p99.BaseMs), fmtMs(p99.MeasuredMs), fmtMs(p50.BaseMs), fmtMs(p50.MeasuredMs), success)
	case math.IsInf(tol.P99Ratio, 1):
		sc.Verdict = Pass
		sc.Reason = fmt.Sprintf("%s not judged (p99 unchecked); p50 %s → %s within +%s; %s", p99.describe("p99", false),
			fmtMs(p50.BaseMs), fmtMs(p50.CurrentMs), fmtPercent(tol.P50Ratio), success)
	case aboveRatio && !p99.inMostSegments(tol.P99Ratio, tol.P99FloorMs):
		sc.Verdict = Pass
		sc.Reason = fmt.Sprintf("%s is above +%s but only in %d of the step's %d segment pairs, fewer than %d (%s): a stall of the machine, not a slower side; %s",
			p99.describe("p99", false), fmtPercent(tol.P99Ratio), p99.segmentsGrown(tol.P99Ratio, tol.P99FloorMs), len(p99.Segments),
			segmentsNeeded(len(p99.Segments)), p99.describeSegments(), success)
	case aboveRatio && p99.DeltaMs <= tol.P99FloorMs:
		sc.Verdict = Pass
		sc.Reason = fmt.Sprintf("%s is above +%s but within the %s noise floor; %s",
			p99.describe("p99", false), fmtPercent(tol.P99Ratio), fmtMs(tol.P99FloorMs), success)
	case aboveRatio:
		sc.Verdict = Pass
		sc.Reason = fmt.Sprintf("%s is above +%s but not significant (%s ≥ %g); %s",
			p99.describe("p99", false), fmtPercent(tol.P99Ratio), p99.pName(), tol.Alpha, success)
	case p99.fell(tol.P99Ratio, tol.P99FloorMs, tol.Alpha):
		sc.Verdict = Improved
		sc.Reason = fmt.Sprintf("%s improved beyond the tolerances; %s", p99.describe("p99", true), success)
	default:
		sc.Verdict = Pass
		sc.Reason = fmt.Sprintf("%s within +%s; %s", p99.describe("p99", false), fmtPercent(tol.P99Ratio), success)
	}
	return sc
}

// fmtMs keeps three decimals below 1 ms, where webhook latencies live and
// 0.45 vs. 0.455 matters, and two above.
func fmtMs(v float64) string {
	if math.Abs(v) < 1 {
		return fmt.Sprintf("%.3f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

func fmtSignedMs(v float64) string {
	if math.Abs(v) < 1 {
		return fmt.Sprintf("%+.3f ms", v)
	}
	return fmt.Sprintf("%+.2f ms", v)
}
func fmtRatio(v float64) string   { return fmt.Sprintf("%.2f%%", v*100) }
func fmtPoints(v float64) string  { return fmt.Sprintf("%.2f", v*100) }
func fmtPercent(v float64) string { return fmt.Sprintf("%g%%", math.Round(v*1000)/10) }

func fmtPercentChange(base, cur float64) string {
	if base == 0 {
		return "base 0"
	}
	return fmt.Sprintf("%+.0f%%", (cur/base-1)*100)
}
