package result

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// windowedStep is a step whose windows have the given p50s and p99s.
func windowedStep(name string, rate float64, p50s, p99s []float64) Step {
	s := Step{StepSpec: StepSpec{Name: name, Mode: Direct, Rate: rate}, Requests: uint64(rate * 10), SuccessRatio: 1, AchievedRate: rate}
	for i := range p50s {
		s.Windows = append(s.Windows, Window{StartSeconds: float64(i), Requests: int(rate), P50Ms: p50s[i], P99Ms: p99s[i]})
	}
	s.P50Ms, s.P99Ms = median(p50s), median(p99s)
	return s
}

// noisy is n values around centre, each off by up to ±spread, as the windows of one side
// of an A/A run on a busy machine.
func noisy(rng *rand.Rand, n int, centre, spread float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = centre + spread*(2*rng.Float64()-1)
	}
	return out
}

func compareABOne(t *testing.T, a, b Step) StepComparison {
	t.Helper()
	c := CompareAB(run("a", a), run("b", b), DefaultABTolerances(), 1000)
	require.Len(t, c.Steps, 1)
	return c.Steps[0]
}

func TestCompareABCatchesADelayEveryWindowPairShows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // G404: fixed seed, synthetic data
	p50, p99 := noisy(rng, 10, 0.3, 0.05), noisy(rng, 10, 0.9, 0.2)
	slower50, slower99 := make([]float64, 10), make([]float64, 10)
	for i := range p50 {
		slower50[i], slower99[i] = p50[i]+1, p99[i]+1 // an injected 1 ms
	}
	sc := compareABOne(t, windowedStep("direct/validate-dgd", 1000, p50, p99), windowedStep("direct/validate-dgd", 1000, slower50, slower99))
	assert.Equal(t, Regressed, sc.Verdict)
	assert.Equal(t, 10, sc.P50.Pairs)
	assert.InDelta(t, 1.0/1024, sc.P50.PGreater, 1e-12, "B lost all 10 pairs")
	assert.InDelta(t, 1.0, sc.P50.MachineFactor, 0, "no machine factor: both sides ran on the same machine at once")
	assert.Contains(t, sc.Reason, "sign test p=0.000977 over 10 window pairs")
}

func TestCompareABPassesAnAARunOnABusyMachine(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4)) //nolint:gosec // G404: fixed seed, synthetic data
	for i := 0; i < 200; i++ {
		// The machine's drift moves both sides of a pair together; each side adds its own jitter.
		drift := noisy(rng, 10, 0, 0.3)
		a50, b50 := noisy(rng, 10, 0.4, 0.1), noisy(rng, 10, 0.4, 0.1)
		a99, b99 := noisy(rng, 10, 2, 0.8), noisy(rng, 10, 2, 0.8)
		for j := range drift {
			a50[j] += drift[j] / 3
			b50[j] += drift[j] / 3
			a99[j] += drift[j]
			b99[j] += drift[j]
		}
		sc := compareABOne(t, windowedStep("direct/mutate-dgd", 500, a50, a99), windowedStep("direct/mutate-dgd", 500, b50, b99))
		require.NotEqual(t, Regressed, sc.Verdict, "A/A run %d: %s", i, sc.Reason)
	}
}

func TestCompareABNeedsMostPairsSlower(t *testing.T) {
	// B is 3× slower in two window pairs (a stall on its side), equal elsewhere: the medians
	// barely move and the sign test does not call it.
	a := []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	b := []float64{3, 3, 1, 1, 1, 1, 1, 1, 1, 1}
	sc := compareABOne(t, windowedStep("apiserver/dgd", 100, a, a), windowedStep("apiserver/dgd", 100, b, b))
	assert.Equal(t, Pass, sc.Verdict, sc.Reason)
}

func TestCompareABDoesNotJudgeSharedOrSaturatedSteps(t *testing.T) {
	ctl := windowedStep("apiserver/dgd-control", 200, []float64{2, 2}, []float64{5, 5})
	ctl.Shared = true
	sc := compareABOne(t, ctl, ctl)
	assert.Equal(t, Pass, sc.Verdict)
	assert.Equal(t, "measured once for both sides (p99 5.00 ms, p50 2.00 ms): not judged", sc.Reason)

	a := windowedStep("apiserver/dgd", 400, []float64{900, 900}, []float64{2000, 2000})
	b := windowedStep("apiserver/dgd", 400, []float64{1500, 1500}, []float64{4000, 4000})
	sc = compareABOne(t, a, b)
	assert.Equal(t, Saturated, sc.Verdict)
	assert.False(t, sc.Verdict.Failing())
	assert.Equal(t, "beyond the machine's capacity: p50 900.00 ms (A), 1500.00 ms (B) above 1000.00 ms; reported, not judged", sc.Reason)
}

func TestCompareABDoesNotJudgeAStepTheLoadGeneratorCouldNotSend(t *testing.T) {
	// A/A run 2 under a concurrent e2e matrix (direct/validate-dgd @ 2000 req/s, load 7.1): side B's
	// two adjacent halves met the machine choking; vegeta sent 1865 of the 2000 req/s asked.
	a := windowedStep("direct/validate-dgd", 2000, []float64{0.51, 0.44, 0.46, 0.56, 20.84, 0.69, 0.69, 0.66, 0.7, 0.75},
		[]float64{6.6, 2.8, 3.7, 8.9, 1417.3, 9.5, 13.9, 9.0, 30.9, 19.1})
	b := windowedStep("direct/validate-dgd", 2000, []float64{0.57, 1.63, 1.6, 0.78, 0.58, 1.47, 183.64, 2459.36, 1981.24, 1476.01},
		[]float64{7.9, 97.9, 68.5, 26.1, 82.6, 48.0, 3003.1, 3369.8, 2675.0, 2872.6})
	a.AchievedRate, b.AchievedRate = 1999, 1865
	sc := compareABOne(t, a, b)
	assert.Equal(t, Saturated, sc.Verdict)
	assert.Equal(t, "beyond the machine's capacity: the load generator sent 1999 (A) and 1865 (B) of the 2000 req/s asked, below 95 %; reported, not judged", sc.Reason)

	b.AchievedRate = 1990
	assert.Equal(t, Regressed, compareABOne(t, a, b).Verdict, "sent at its rate, the same windows are a slower side B")
}

func TestCompareABMissingStepFails(t *testing.T) {
	a := windowedStep("direct/validate-dgd", 2000, []float64{1}, []float64{2})
	c := CompareAB(run("a", a), run("b"), DefaultABTolerances(), 0)
	require.Len(t, c.Steps, 1)
	assert.Equal(t, Missing, c.Steps[0].Verdict)
	assert.True(t, c.Failed())
	assert.Equal(t, "side A measured it (p99 2.00 ms), side B did not", c.Steps[0].Reason)
}

// inSegments is s measured in n segments per side.
func inSegments(s Step, n int) Step {
	s.Segments = n
	return s
}

func TestCompareABPassesAStallOfTheMachineInAFewSegments(t *testing.T) {
	// A/A run 4 of the halves era (apiserver/dgd @ 100 req/s): a stall of about 20 s met both of
	// side B's adjacent halves. In four segments per side (A B B A A B B A) a stall of two
	// segments' length met side B's first two; its other two matched side A.
	a := []float64{0.9, 0.9, 0.92, 0.9, 0.91, 0.88, 0.9, 0.9}
	b := []float64{41.2, 35.8, 28.4, 60.1, 0.93, 0.95, 0.9, 0.94}
	p99a := []float64{2, 2.1, 2, 2.2, 2, 2.1, 2, 2}
	p99b := []float64{310, 280, 450, 390, 2.4, 2.2, 2.1, 2.3}
	sa, sb := inSegments(windowedStep("apiserver/dgd", 100, a, p99a), 4), inSegments(windowedStep("apiserver/dgd", 100, b, p99b), 4)
	sc := compareABOne(t, sa, sb)
	assert.Equal(t, Pass, sc.Verdict, sc.Reason)
	assert.Contains(t, sc.Reason, "is above +100% but only in 2 of the step's 4 segment pairs, fewer than 3 "+
		"(segments 2.05 ms → 295.00 ms, 2.10 ms → 420.00 ms, 2.05 ms → 2.30 ms, 2.00 ms → 2.20 ms): a stall of the machine, not a slower side")
	require.Len(t, sc.P50.Segments, 4)

	// The same growth in three of the four segments is a slower side.
	sb = inSegments(windowedStep("apiserver/dgd", 100, append(slices.Clone(b[:6]), 30, 30), append(slices.Clone(p99b[:6]), 300, 300)), 4)
	sb.Windows[4].P50Ms, sb.Windows[5].P50Ms, sb.Windows[4].P99Ms, sb.Windows[5].P99Ms = 30, 30, 300, 300
	sc = compareABOne(t, sa, sb)
	assert.Equal(t, Regressed, sc.Verdict, sc.Reason)

	// Two segments per side: the growth must show in both.
	sa, sb = inSegments(sa, 2), inSegments(windowedStep("apiserver/dgd", 100, b, p99b), 2)
	sc = compareABOne(t, sa, sb)
	assert.Equal(t, Pass, sc.Verdict, sc.Reason)
	assert.Contains(t, sc.Reason, "only in 1 of the step's 2 segment pairs, fewer than 2")

	// Steps whose sides ran in different segments are judged without the rule.
	sc = compareABOne(t, inSegments(sa, 4), inSegments(sb, 2))
	assert.Equal(t, Regressed, sc.Verdict, sc.Reason)
	assert.Empty(t, sc.P99.Segments)
}

func TestBenjaminiHochberg(t *testing.T) {
	q := benjaminiHochberg([]float64{0.01, 0.04, 0.03, 0.005})
	for i, want := range []float64{0.02, 0.04, 0.04, 0.02} {
		assert.InDelta(t, want, q[i], 1e-12, "q[%d]", i)
	}
	assert.Equal(t, []float64{1}, benjaminiHochberg([]float64{1}))
}

// abRun is a run of n steps (direct/validate-dgd at rates 100, 200, …) whose windows are a and
// b on the sides, the step at index odd having oddA and oddB instead.
func abRun(n int, a, b []float64, odd int, oddA, oddB []float64) (Result, Result) {
	var ra, rb Result
	for i := range n {
		wa, wb := a, b
		if i == odd {
			wa, wb = oddA, oddB
		}
		rate := float64(100 * (i + 1))
		ra.Steps = append(ra.Steps, inSegments(windowedStep("direct/validate-dgd", rate, wa, wa), 4))
		rb.Steps = append(rb.Steps, inSegments(windowedStep("direct/validate-dgd", rate, wb, wb), 4))
	}
	return ra, rb
}

func TestCompareABAdjustsTheRunsTestsTogether(t *testing.T) {
	// A/A run 2 (Intel Xeon, 2026-11-25, mutate suites running beside it): direct/mutate-dgd @ 250
	// req/s, p99 of 8 windows; side B lost 7 of 8 pairs (p = 0.035) and grew in 3 of 4 segments.
	// Alone it looks slower; among the run's 15 judged steps it is what one in twenty tests gives
	// by chance.
	loneA := []float64{1.44, 1.91, 1.37, 1.4, 7.46, 2.68, 2.28, 2.18}
	loneB := []float64{7.08, 2.29, 4.59, 4.29, 6.03, 3.25, 3.22, 9.45}
	even := []float64{2, 2.1, 1.9, 2, 2.2, 1.8, 2, 2.1}
	evenB := []float64{2.1, 2, 2, 1.9, 2.1, 1.9, 2.2, 2}
	a, b := abRun(1, nil, nil, 0, loneA, loneB)
	c := CompareAB(a, b, DefaultABTolerances(), 0)
	assert.Equal(t, Regressed, c.Steps[0].Verdict, "one step alone: its own p-value decides")
	assert.Zero(t, c.Steps[0].P99.Tests)

	a, b = abRun(15, even, evenB, 3, loneA, loneB)
	c = CompareAB(a, b, DefaultABTolerances(), 0)
	require.Len(t, c.Steps, 15)
	assert.False(t, c.Failed(), "no step regressed")
	assert.Equal(t, 15, c.Steps[3].P99.Tests)
	assert.Contains(t, c.Steps[3].Reason, "[sign test p=0.0352 over 8 window pairs; q=0.527 adjusted for the run's 15 tests] is above +100% but not significant (q ≥ 0.05)")

	// The same step slower in all 12 window pairs of a 12-window run stands out even among 15.
	slowA := []float64{1.4, 1.9, 1.4, 1.4, 1.5, 2.7, 2.3, 2.2, 1.6, 1.7, 1.5, 1.8}
	slowB := make([]float64, len(slowA))
	for i := range slowA {
		slowB[i] = slowA[i] + 3
	}
	even12, even12B := append(slices.Clone(even), 2, 1.9, 2.1, 2), append(slices.Clone(evenB), 2, 2.1, 1.9, 2)
	a, b = abRun(15, even12, even12B, 3, slowA, slowB)
	c = CompareAB(a, b, DefaultABTolerances(), 0)
	assert.Equal(t, Regressed, c.Steps[3].Verdict, c.Steps[3].Reason)
	assert.Contains(t, c.Steps[3].Reason, "sign test p=0.000244 over 12 window pairs; q=0.00366 adjusted for the run's 15 tests")
	assert.Equal(t, 1, countVerdicts(c, Regressed))

	// A slowdown at every step: each one is found with the evidence of all.
	a, b = abRun(15, slowA, slowB, -1, nil, nil)
	assert.Equal(t, 15, countVerdicts(CompareAB(a, b, DefaultABTolerances(), 0), Regressed))
}

func countVerdicts(c Comparison, v Verdict) int {
	n := 0
	for _, s := range c.Steps {
		if s.Verdict == v {
			n++
		}
	}
	return n
}

func TestCompareABStatesTheClustersDifferenceOfEachSidesReferenceAndDoesNotJudgeIt(t *testing.T) {
	// Each side's control in its own cluster: B's cluster 3× slower, in every window.
	a := windowedStep("apiserver/target-control", 100, []float64{2, 2, 2, 2}, []float64{4, 4, 4, 4})
	b := windowedStep("apiserver/target-control", 100, []float64{6, 6, 6, 6}, []float64{8, 8, 8, 8})
	a.Reference, b.Reference = true, true
	a.Segments, b.Segments = 2, 2
	b.P99Ms = 80 // one burst in the whole step: the windows' median is what the report's columns show
	sc := compareABOne(t, a, b)
	assert.Equal(t, Pass, sc.Verdict, "a difference between the clusters is no regression of the target")
	assert.Equal(t, "each side's own cluster without its webhooks: B/A p50 ×3.00 (2.00 ms → 6.00 ms), p99 ×2.00 (4.00 ms → 8.00 ms), the clusters' difference; not judged", sc.Reason)

	a.Reference, b.Reference = false, false
	assert.Equal(t, Regressed, compareABOne(t, a, b).Verdict, "the same windows, judged, regress")
}

func TestCompareABNamesTheTargetVersionsOfEachSide(t *testing.T) {
	s := windowedStep("apiserver/target", 100, []float64{2, 2}, []float64{4, 4})
	a, b := run("a", s), run("b", s)
	a.Target, b.Target = "gatekeeper github.com/open-policy-agent/gatekeeper/v3@v3.17.0", "gatekeeper github.com/open-policy-agent/gatekeeper/v3@v3.23.1"
	c := CompareAB(a, b, DefaultABTolerances(), 1000)
	assert.Equal(t, a.Target, c.BaseTarget)
	assert.Equal(t, b.Target, c.CurrentTarget)
}
