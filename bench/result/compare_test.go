package result

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func step(name string, rate, p99Ms, success float64) Step {
	return Step{
		StepSpec:     StepSpec{Name: name, Mode: Direct, Target: "/validate", Rate: rate},
		Requests:     uint64(rate * 10),
		SuccessRatio: success,
		P50Ms:        0.3, // see stepWithP50: these tests judge the tail
		P99Ms:        p99Ms,
	}
}

func stepWithP50(name string, rate, p50Ms, p99Ms float64) Step {
	s := step(name, rate, p99Ms, 1)
	s.P50Ms = p50Ms
	return s
}

func run(name string, steps ...Step) Result {
	return Result{Run: name, GitRevision: name + "-rev", Steps: steps}
}

// compareOne compares a single step pair under the default tolerances.
func compareOne(t *testing.T, base, cur Step) StepComparison {
	t.Helper()
	c := Compare(run("base", base), run("current", cur), DefaultTolerances())
	require.Len(t, c.Steps, 1)
	return c.Steps[0]
}

func TestCompareCatchesClearP99Regression(t *testing.T) {
	// The injected slowdown: +5 ms on a ~1 ms webhook.
	sc := compareOne(t, step("direct/validate", 1000, 0.9, 1), step("direct/validate", 1000, 5.9, 1))
	assert.Equal(t, Regressed, sc.Verdict)
	assert.InDelta(t, 5.0, sc.P99.DeltaMs, 1e-9)
	assert.InDelta(t, 5.9/0.9, sc.P99.Ratio, 1e-9)
	assert.Equal(t, "p99 0.900 ms → 5.90 ms (+556%, +5.00 ms) exceeds +100% and the 0.500 ms noise floor", sc.Reason)
}

func TestCompareToleratesNoiseWithinRatio(t *testing.T) {
	// +60 % and +0.9 ms, as two runs of the same code differed at 2,000
	// req/s: above the floor but within the ratio.
	sc := compareOne(t, step("direct/mutate", 2000, 1.52, 1), step("direct/mutate", 2000, 2.43, 1))
	assert.Equal(t, Pass, sc.Verdict)
	assert.Equal(t, "p99 1.52 ms → 2.43 ms (+60%, +0.910 ms) within +100%; success 100.00% → 100.00%", sc.Reason)
}

func TestCompareIgnoresJitterUnderNoiseFloor(t *testing.T) {
	// +150 % but only +0.45 ms: scheduler jitter on a sub-millisecond path.
	sc := compareOne(t, step("direct/mutate", 100, 0.30, 1), step("direct/mutate", 100, 0.75, 1))
	assert.Equal(t, Pass, sc.Verdict)
	assert.Contains(t, sc.Reason, "p99 0.300 ms → 0.750 ms (+150%, +0.450 ms) is above +100% but within the 0.500 ms noise floor")
}

func TestCompareNeedsBothRatioAndFloor(t *testing.T) {
	// +8 ms on a 10 ms path is +80 %: over the floor, under the ratio.
	sc := compareOne(t, step("apiserver/dgd", 50, 10, 1), step("apiserver/dgd", 50, 18, 1))
	assert.Equal(t, Pass, sc.Verdict)
}

func TestCompareCatchesSuccessDrop(t *testing.T) {
	sc := compareOne(t, step("direct/validate", 2000, 1, 1), step("direct/validate", 2000, 1, 0.99))
	assert.Equal(t, Regressed, sc.Verdict)
	assert.InDelta(t, -0.01, sc.SuccessDelta, 1e-12)
	assert.Equal(t, "success 100.00% → 99.00% dropped by 1.00 points, more than the 0.10 allowed", sc.Reason)
}

func TestCompareAllowsSuccessDropOfExactlyTheTolerance(t *testing.T) {
	sc := compareOne(t, step("direct/validate", 2000, 1, 1), step("direct/validate", 2000, 1, 0.999))
	assert.Equal(t, Pass, sc.Verdict)
}

func TestCompareReportsBothReasons(t *testing.T) {
	sc := compareOne(t, step("direct/validate", 500, 1, 1), step("direct/validate", 500, 3, 0.5))
	assert.Equal(t, Regressed, sc.Verdict)
	assert.Contains(t, sc.Reason, "exceeds +100%")
	assert.Contains(t, sc.Reason, "; success 100.00% → 50.00% dropped by 50.00 points")
}

func TestCompareMarksImprovement(t *testing.T) {
	sc := compareOne(t, step("direct/validate", 500, 4, 1), step("direct/validate", 500, 1, 1))
	assert.Equal(t, Improved, sc.Verdict)
	assert.False(t, sc.Verdict.Failing())
}

func TestCompareReportsMissingAndNewSteps(t *testing.T) {
	base := run("base",
		step("direct/validate", 100, 0.5, 1),
		step("direct/validate", 1000, 0.8, 1),
		step("direct/validate", 2000, 1.0, 1),
	)
	// The ladder stopped at 1,000 req/s and a new mutate ladder appeared.
	cur := run("current",
		step("direct/mutate", 100, 0.4, 1),
		step("direct/validate", 1000, 0.8, 1),
		step("direct/validate", 100, 0.5, 1),
	)
	c := Compare(base, cur, DefaultTolerances())

	var got []string
	for _, s := range c.Steps {
		got = append(got, StepSpec{Name: s.Name, Rate: s.Rate}.Key()+" "+string(s.Verdict))
	}
	assert.Equal(t, []string{
		"direct/validate@100 pass",
		"direct/validate@1000 pass",
		"direct/validate@2000 missing",
		"direct/mutate@100 new",
	}, got, "baseline order first, new steps last")

	missing := c.Steps[2]
	assert.Nil(t, missing.Current)
	require.NotNil(t, missing.Base)
	assert.Equal(t, "measured in the baseline (p99 1.00 ms) but not in this run", missing.Reason)
	assert.Nil(t, c.Steps[3].Base)

	assert.True(t, c.Failed(), "a missing step fails the comparison")
	assert.Equal(t, 1, c.Count(Missing))
	assert.Equal(t, 1, c.Count(New))
	assert.Equal(t, "base-rev", c.BaseRevision)
	assert.Equal(t, "current-rev", c.CurrentRevision)
}

func TestCompareMatchesByNameAndRate(t *testing.T) {
	// Same rate, different ladders: never compared with each other.
	base := run("base", step("direct/validate", 100, 0.5, 1))
	cur := run("current", step("direct/mutate", 100, 5, 1))
	c := Compare(base, cur, DefaultTolerances())
	require.Len(t, c.Steps, 2)
	assert.Equal(t, Missing, c.Steps[0].Verdict)
	assert.Equal(t, New, c.Steps[1].Verdict)
}

func TestCompareIdenticalRunsPass(t *testing.T) {
	r := run("r", step("direct/validate", 100, 0.5, 1), step("apiserver/dgd", 50, 3, 1))
	c := Compare(r, r, DefaultTolerances())
	assert.False(t, c.Failed())
	assert.Equal(t, 2, c.Count(Pass))
}

func TestCompareWithZeroTolerance(t *testing.T) {
	c := Compare(run("b", step("x", 1, 1, 1)), run("c", step("x", 1, 1.001, 1)), Tolerances{})
	assert.Equal(t, Regressed, c.Steps[0].Verdict)
}

func TestCompareCatchesAMedianShiftTheTailHides(t *testing.T) {
	// The injected +5 ms seen on a machine whose p99 is already stalls: the
	// tail barely moves, the median jumps.
	sc := compareOne(t, stepWithP50("direct/validate", 1000, 0.35, 60), stepWithP50("direct/validate", 1000, 5.6, 66))
	assert.Equal(t, Regressed, sc.Verdict)
	assert.InDelta(t, 5.25, sc.P50.DeltaMs, 1e-9)
	assert.Equal(t, "p50 0.350 ms → 5.60 ms (+1500%, +5.25 ms) exceeds +50% and the 0.500 ms noise floor", sc.Reason)
}

func TestCompareToleratesMedianJitter(t *testing.T) {
	// Seen between identical runs on a shared 2-core machine: ×2 on a 0.4 ms
	// median is +0.4 ms, under the floor; +30 % on 5.6 ms is under the ratio.
	assert.Equal(t, Pass, compareOne(t, stepWithP50("direct/mutate", 2000, 0.385, 2), stepWithP50("direct/mutate", 2000, 0.765, 2)).Verdict)
	assert.Equal(t, Pass, compareOne(t, stepWithP50("apiserver/dgd", 50, 5.6, 12), stepWithP50("apiserver/dgd", 50, 7.3, 12)).Verdict)
}

func TestCompareListsEveryReason(t *testing.T) {
	base := stepWithP50("direct/validate", 100, 0.4, 1)
	cur := stepWithP50("direct/validate", 100, 6, 12)
	cur.SuccessRatio = 0.9
	sc := compareOne(t, base, cur)
	assert.Equal(t, Regressed, sc.Verdict)
	assert.Equal(t, 2, strings.Count(sc.Reason, "; "), sc.Reason)
	assert.Contains(t, sc.Reason, "p99 1.00 ms → 12.00 ms")
	assert.Contains(t, sc.Reason, "p50 0.400 ms → 6.00 ms")
	assert.Contains(t, sc.Reason, "success 100.00% → 90.00%")
}

func TestCompareWithUnboundedP99Ratio(t *testing.T) {
	// For a machine whose tail is other people's work: p99 never fails, p50
	// still does.
	tol := DefaultTolerances()
	tol.P99Ratio = math.Inf(1)
	c := Compare(run("b", stepWithP50("x", 1, 0.4, 2)), run("c", stepWithP50("x", 1, 0.4, 2000)), tol)
	assert.Equal(t, Pass, c.Steps[0].Verdict)
	assert.Equal(t, "p99 2.00 ms → 2000.00 ms (+99900%, +1998.00 ms) not judged (p99 unchecked); p50 0.400 ms → 0.400 ms within +50%; success 100.00% → 100.00%", c.Steps[0].Reason)
	c = Compare(run("b", stepWithP50("x", 1, 0.4, 2)), run("c", stepWithP50("x", 1, 5.4, 2)), tol)
	assert.Equal(t, Regressed, c.Steps[0].Verdict)
}

// windowed is a step whose windows have these p99s (and p50 = p99/3), its
// overall percentiles taken from the windows as a run would report them.
func windowed(name string, rate float64, p99s ...float64) Step {
	s := step(name, rate, slices.Max(p99s), 1)
	s.P50Ms = median(p99s) / 3
	for i, p := range p99s {
		s.Windows = append(s.Windows, Window{StartSeconds: float64(i) * 2, Requests: int(rate * 2), P50Ms: p / 3, P99Ms: p})
	}
	return s
}

// controlled names control as s's control ladder.
func controlled(s Step, control string) Step {
	s.Control = control
	return s
}

func TestCompareIgnoresStallsInAFewWindows(t *testing.T) {
	// A shared machine: another job stalls one window of each run. The
	// overall p99s are 50 ms and 40 ms; the typical window is 1 ms in both.
	base := windowed("direct/validate", 1000, 1.0, 1.1, 50, 0.9, 1.0)
	cur := windowed("direct/validate", 1000, 1.0, 40, 1.1, 0.95, 1.05)
	sc := compareOne(t, base, cur)
	assert.Equal(t, Pass, sc.Verdict, sc.Reason)
	assert.InDelta(t, 1.0, sc.P99.BaseMs, 1e-9)
	assert.InDelta(t, 1.05, sc.P99.CurrentMs, 1e-9)
}

func TestCompareCatchesASlowdownInEveryWindow(t *testing.T) {
	// The injected +5 ms: every window moves, and a stalled window in each
	// run does not hide it.
	base := windowed("direct/validate", 1000, 1.0, 1.1, 50, 0.9, 1.0, 1.2, 0.8, 1.0, 1.1, 0.9)
	cur := windowed("direct/validate", 1000, 6.0, 6.1, 5.9, 6.2, 6.0, 0.9, 6.1, 5.9, 6.2, 6.0)
	sc := compareOne(t, base, cur)
	assert.Equal(t, Regressed, sc.Verdict)
	require.True(t, sc.P99.Tested())
	assert.Less(t, sc.P99.PGreater, DefaultAlpha)
	assert.Contains(t, sc.Reason, "p99 1.00 ms → 6.00 ms (+500%, +5.00 ms) [U test p=0.")
	assert.Contains(t, sc.Reason, "over 10+10 windows] exceeds +100% and the 0.500 ms noise floor")
}

func TestCompareNeedsASignificantShift(t *testing.T) {
	// The medians differ by +114 %, but the windows overlap: one run's
	// spread, not a slower webhook.
	base := windowed("apiserver/dgd", 100, 10, 12, 14, 20, 22)
	cur := windowed("apiserver/dgd", 100, 11, 13, 30, 32, 35)
	sc := compareOne(t, base, cur)
	assert.Equal(t, Pass, sc.Verdict)
	assert.Greater(t, sc.P99.PGreater, DefaultAlpha)
	assert.Contains(t, sc.Reason, "is above +100% but not significant (p ≥ 0.05)")

	tol := DefaultTolerances()
	tol.Alpha = 1
	c := Compare(run("b", base), run("c", cur), tol)
	assert.Equal(t, Regressed, c.Steps[0].Verdict, "alpha 1 turns the test off")
}

func TestCompareSkipsTheRankTestWhenWindowsAreTooFew(t *testing.T) {
	// 2 against 2 windows can never reach p < 0.05: ratio and floor decide.
	sc := compareOne(t, windowed("direct/validate", 100, 1, 1), windowed("direct/validate", 100, 6, 6))
	assert.False(t, sc.P99.Tested())
	assert.Equal(t, Regressed, sc.Verdict)
	assert.NotContains(t, sc.Reason, "U test")
}

func TestCompareScalesByTheControlLadder(t *testing.T) {
	// The current run's machine is 2.5× slower: the webhook and its control
	// both slowed by that much. Raw, the webhook's p99 grew by 150 %.
	base := run("base",
		controlled(windowed("direct/validate", 500, 1.0, 1.0, 1.1, 0.9, 1.0), "direct/control"),
		windowed("direct/control", 500, 0.5, 0.5, 0.55, 0.45, 0.5))
	cur := run("current",
		controlled(windowed("direct/validate", 500, 2.5, 2.5, 2.75, 2.25, 2.5), "direct/control"),
		windowed("direct/control", 500, 1.25, 1.25, 1.375, 1.125, 1.25))
	c := Compare(base, cur, DefaultTolerances())
	require.Len(t, c.Steps, 2)
	assert.False(t, c.Failed(), "%s\n%s", c.Steps[0].Reason, c.Steps[1].Reason)
	sc := c.Steps[0]
	assert.Equal(t, "direct/control", sc.P99.Control)
	assert.InDelta(t, 2.5, sc.P99.MachineFactor, 1e-9)
	assert.InDelta(t, 2.5, sc.P99.MeasuredMs, 1e-9)
	assert.InDelta(t, 1.0, sc.P99.CurrentMs, 1e-9)
	assert.Contains(t, sc.Reason, "p99 1.00 ms → 1.00 ms (+0%, +0.000 ms) [measured 2.50 ms; direct/control ×2.50")
	assert.Equal(t, "control: latency is the machine's, not judged (p99 0.500 ms → 1.25 ms, p50 0.167 ms → 0.417 ms); success 100.00% → 100.00%", c.Steps[1].Reason)

	// The same machine with the webhook 5 ms slower: caught, once scaled.
	cur.Steps[0] = controlled(windowed("direct/validate", 500, 15, 15, 15.25, 14.75, 15), "direct/control")
	c = Compare(base, cur, DefaultTolerances())
	assert.Equal(t, Regressed, c.Steps[0].Verdict)
	assert.InDelta(t, 6.0, c.Steps[0].P99.CurrentMs, 1e-9)
}

func TestCompareJudgesControlLaddersOnSuccessOnly(t *testing.T) {
	base := run("base", controlled(step("apiserver/dgd", 50, 5, 1), "apiserver/dgd-control"), step("apiserver/dgd-control", 50, 3, 1))
	cur := run("current", controlled(step("apiserver/dgd", 50, 5, 1), "apiserver/dgd-control"), step("apiserver/dgd-control", 50, 30, 0.9))
	c := Compare(base, cur, DefaultTolerances())
	assert.Equal(t, Regressed, c.Steps[1].Verdict)
	assert.Equal(t, "success 100.00% → 90.00% dropped by 10.00 points, more than the 0.10 allowed", c.Steps[1].Reason,
		"a slower control is the machine; failing requests are not")
}
