package result

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/aclements/go-moremath/stats"
)

// Saturated is the verdict on an A/B step beyond the machine's capacity: a
// side's p50 exceeded the saturation bound, so its latency measures the queue
// in front of the server, not the server. It is reported, not judged on
// latency, and does not fail.
const Saturated Verdict = "saturated"

// MinAchievedRatio is the share of the asked rate the load generator must
// have sent on both sides for CompareAB to judge a step: below it the machine
// could not even produce the load, and the latencies measure its queues.
const MinAchievedRatio = 0.95

// DefaultABTolerances are CompareAB's. The median, measured on both sides at
// the same time, is judged tighter than against a stored baseline: p50 may
// grow by 25 % beyond a 0.5 ms floor (sub-millisecond p50s of two identical
// operators on a busy 2-core machine moved by up to 0.3 ms). The p99 of a
// window is its slowest few requests (at 100 req/s, the slowest of 50), so it
// may double beyond a 1 ms floor. Each only when a sign test over the window
// pairs finds it significant at p < 0.05; the success ratio may drop by 0.1
// points.
func DefaultABTolerances() Tolerances {
	return Tolerances{P99Ratio: 1, P99FloorMs: 1, P50Ratio: 0.25, P50FloorMs: 0.5,
		SuccessDrop: DefaultSuccessDrop, Alpha: DefaultAlpha}
}

// CompareAB judges side B of an A/B run against side A: the two sides were
// measured in one run, interleaved (load.RunTurns), so there is no machine
// factor to divide by. Steps are matched by name and rate. A step's p99 and
// p50 are the medians of its windows' percentiles; window i of A and window i
// of B ran next to each other, and a one-sided sign test over those pairs
// (how many pairs B lost) decides whether a growth is significant. With
// window counts that differ, the pairs are lost and the U test of Compare
// decides instead. A run tests every judged step: the p-values of each
// percentile are adjusted together (Benjamini–Hochberg, Shift.Tests), so a
// lone step of two identical sides that looks slower by chance — one test in
// twenty does at p < 0.05 — is not a regression, while a slowdown that shows
// at many rates is found with the evidence of all of them.
//
// A step regresses as in Compare (ratio, floor and significance; or the
// success ratio), and only when the growth beyond ratio and floor also shows
// in most of the step's segment pairs on their own (Shift.Segments,
// SegmentsGrownShare): a side that is slower is slower in every segment,
// while a stall of the machine — a neighbour's burst — lands in a few.
// Steps measured once for both sides (Step.Shared: the controls, the floor)
// pass without a verdict on latency, and so do the controls and floor each side
// measured in a cluster of its own (Step.Reference): their ratio is stated. A step at a rate where either side's p50
// exceeded saturationP50Ms (0: never) is Saturated: reported, not judged; so
// is a step whose load generator fell below MinAchievedRatio of its rate on
// either side.
func CompareAB(a, b Result, tol Tolerances, saturationP50Ms float64) Comparison {
	c := Comparison{
		AB:      true,
		BaseRun: a.Run, BaseRevision: a.GitRevision, BaseMachine: a.Machine,
		CurrentRun: b.Run, CurrentRevision: b.GitRevision, CurrentMachine: b.Machine,
		BaseTarget: a.Target, CurrentTarget: b.Target,
		Tolerances: tol,
	}
	byKey := make(map[string]int, len(b.Steps))
	for i, s := range b.Steps {
		byKey[s.Key()] = i
	}
	matched := make([]bool, len(b.Steps))
	var pairs []abPair
	for i := range a.Steps {
		sa := a.Steps[i]
		j, ok := byKey[sa.Key()]
		if !ok {
			pairs = append(pairs, abPair{skip: &StepComparison{
				Name: sa.Name, Mode: sa.Mode, Rate: sa.Rate, Base: &sa, Verdict: Missing,
				Reason: fmt.Sprintf("side A measured it (p99 %s), side B did not", fmtMs(sa.P99Ms)),
			}})
			continue
		}
		matched[j] = true
		pairs = append(pairs, newABPair(sa, b.Steps[j], tol, saturationP50Ms))
	}
	for j := range b.Steps {
		if !matched[j] {
			sb := b.Steps[j]
			pairs = append(pairs, abPair{skip: &StepComparison{
				Name: sb.Name, Mode: sb.Mode, Rate: sb.Rate, Current: &sb, Verdict: Missing,
				Reason: fmt.Sprintf("side B measured it (p99 %s), side A did not", fmtMs(sb.P99Ms)),
			}})
		}
	}
	var p99s, p50s []*Shift
	for _, p := range pairs {
		if p.skip == nil {
			p99s, p50s = append(p99s, p.p99), append(p50s, p.p50)
		}
	}
	adjustTogether(p99s)
	adjustTogether(p50s)
	for _, p := range pairs {
		c.Steps = append(c.Steps, p.verdict(tol))
	}
	return c
}

// abPair is a step of an A/B run on its way to a verdict: its shifts are
// computed first, adjusted together with the run's others, then judged.
type abPair struct {
	a, b     Step
	p99, p50 *Shift
	// skip, when set, is the verdict of a step not judged on latency: shared,
	// saturated, or measured on one side only.
	skip *StepComparison
}

func newABPair(a, b Step, tol Tolerances, saturationP50Ms float64) abPair {
	segments := 0 // the windows' segments, when both sides ran in the same ones
	if a.Segments == b.Segments {
		segments = a.Segments
	}
	p := abPair{a: a, b: b,
		p99: pairedShift(a.WindowP99s(), b.WindowP99s(), segments, tol.Alpha),
		p50: pairedShift(a.WindowP50s(), b.WindowP50s(), segments, tol.Alpha)}
	sc := StepComparison{Name: a.Name, Mode: a.Mode, Rate: a.Rate, Base: &p.a, Current: &p.b, P99: p.p99, P50: p.p50}
	switch {
	case a.Shared || b.Shared:
		sc.Verdict = Pass
		sc.Reason = fmt.Sprintf("measured once for both sides (p99 %s, p50 %s): not judged", fmtMs(p.p99.BaseMs), fmtMs(p.p50.BaseMs))
	case a.Reference || b.Reference:
		sc.Verdict = Pass
		// The windows' medians, as the judged steps and the report's columns give them: the
		// whole step's p99 is one burst's on a busy machine.
		sc.Reason = fmt.Sprintf("each side's own cluster without its webhooks: B/A p50 ×%.2f (%s → %s), p99 ×%.2f (%s → %s), the clusters' difference; not judged",
			ratioOf(p.p50.MeasuredMs, p.p50.BaseMs), fmtMs(p.p50.BaseMs), fmtMs(p.p50.MeasuredMs),
			ratioOf(p.p99.MeasuredMs, p.p99.BaseMs), fmtMs(p.p99.BaseMs), fmtMs(p.p99.MeasuredMs))
	case saturationP50Ms > 0 && (a.P50Ms > saturationP50Ms || b.P50Ms > saturationP50Ms):
		sc.SuccessDelta, sc.Verdict = b.SuccessRatio-a.SuccessRatio, Saturated
		sc.Reason = fmt.Sprintf("beyond the machine's capacity: p50 %s (A), %s (B) above %s; reported, not judged",
			fmtMs(a.P50Ms), fmtMs(b.P50Ms), fmtMs(saturationP50Ms))
	case a.AchievedRate < MinAchievedRatio*a.Rate || b.AchievedRate < MinAchievedRatio*b.Rate:
		sc.SuccessDelta, sc.Verdict = b.SuccessRatio-a.SuccessRatio, Saturated
		sc.Reason = fmt.Sprintf("beyond the machine's capacity: the load generator sent %.0f (A) and %.0f (B) of the %g req/s asked, "+
			"below %.0f %%; reported, not judged", a.AchievedRate, b.AchievedRate, a.Rate, MinAchievedRatio*100)
	default:
		return p
	}
	p.skip = &sc
	return p
}

func (p abPair) verdict(tol Tolerances) StepComparison {
	if p.skip != nil {
		return *p.skip
	}
	return judge(p.a, p.b, p.p99, p.p50, false, tol)
}

// adjustTogether adjusts the p-values of the tested shifts — one percentile
// over a run's judged steps — for their number (Benjamini–Hochberg: among
// the growths found, the expected share found by chance stays below alpha).
// A single test is left as it is.
func adjustTogether(shifts []*Shift) {
	var tested []*Shift
	for _, sh := range shifts {
		if sh.Tested() {
			tested = append(tested, sh)
		}
	}
	if len(tested) < 2 {
		return
	}
	greater, less := make([]float64, len(tested)), make([]float64, len(tested))
	for i, sh := range tested {
		greater[i], less[i] = sh.PGreater, sh.PLess
	}
	qGreater, qLess := benjaminiHochberg(greater), benjaminiHochberg(less)
	for i, sh := range tested {
		sh.Tests, sh.QGreater, sh.QLess = len(tested), qGreater[i], qLess[i]
	}
}

// benjaminiHochberg returns the q-values of p: p[i] × m / rank(p[i]), made
// monotone from the largest p down, and at most 1.
func benjaminiHochberg(p []float64) []float64 {
	m := len(p)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(p[x], p[y]) })
	q := make([]float64, m)
	least := 1.0
	for rank := m; rank >= 1; rank-- {
		i := order[rank-1]
		least = math.Min(least, p[i]*float64(m)/float64(rank))
		q[i] = least
	}
	return q
}

// pairedShift is how one percentile moved from A's windows (a) to B's (b).
// Window i of each side ran beside the other's window i, so when both sides
// have the same number of windows a sign test over the pairs decides
// significance, and the windows split evenly into the given number of
// segments (0 or 1: no segments); otherwise the U test does. The shift has no
// machine factor.
func pairedShift(a, b []float64, segments int, alpha float64) *Shift {
	sh := &Shift{BaseMs: median(a), MeasuredMs: median(b), MachineFactor: 1, Windows: [2]int{len(a), len(b)}}
	sh.CurrentMs = sh.MeasuredMs
	sh.DeltaMs = sh.CurrentMs - sh.BaseMs
	if sh.BaseMs > 0 {
		sh.Ratio = sh.CurrentMs / sh.BaseMs
	}
	if len(a) != len(b) {
		sh.PGreater, sh.PLess = uTest(a, b, alpha)
		return sh
	}
	if n := len(a); segments > 1 && n >= segments && n%segments == 0 {
		per := n / segments
		for k := range segments {
			sh.Segments = append(sh.Segments, [2]float64{median(a[k*per : (k+1)*per]), median(b[k*per : (k+1)*per])})
		}
	}
	var slower, faster int
	for i := range a {
		switch {
		case b[i] > a[i]:
			slower++
		case b[i] < a[i]:
			faster++
		}
	}
	n := slower + faster
	sh.Pairs = n
	if n == 0 || math.Pow(0.5, float64(n)) >= alpha {
		// Too few pairs that differ for the test to ever reach alpha: ratio
		// and floor decide alone.
		sh.Pairs = 0
		return sh
	}
	d := stats.BinomialDist{N: n, P: 0.5}
	// P(at least `slower` of n pairs slower by chance), and the same for faster.
	sh.PGreater = math.Max(1-d.CDF(float64(slower)-1), math.SmallestNonzeroFloat64)
	sh.PLess = math.Max(d.CDF(float64(slower)), math.SmallestNonzeroFloat64)
	return sh
}

// ratioOf is b/a, 0 when a is not positive.
func ratioOf(b, a float64) float64 {
	if a <= 0 {
		return 0
	}
	return b / a
}
