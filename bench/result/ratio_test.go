package result

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// throughAPIServer is a step of ladder name at rate whose control is control, with windows of
// the given p50s and p99s (each its own, or nil for none), measured in turns when segments > 0.
func throughAPIServer(name, control string, rate float64, segments int, p50s, p99s []float64) Step {
	s := windowedStep(name, rate, p50s, p99s)
	s.Mode, s.Control, s.Segments = APIServer, control, segments
	return s
}

// plus is values with d added to each.
func plus(values []float64, d float64) []float64 {
	out := make([]float64, len(values))
	for i, v := range values {
		out[i] = v + d
	}
	return out
}

func TestFloorRatiosWithoutTurnsDivideTheStepsOverheads(t *testing.T) {
	r := run("bench",
		stepWithP50("apiserver/dgd", 50, 8, 20),
		stepWithP50("apiserver/dgd-control", 50, 5, 10),
		stepWithP50("apiserver/floor", 50, 7, 14),
	)
	for i := range r.Steps {
		r.Steps[i].Mode = APIServer
	}
	r.Steps[0].Control, r.Steps[2].Control = "apiserver/dgd-control", "apiserver/dgd-control"
	ratios := r.FloorRatios("apiserver/dgd", "apiserver/floor")
	require.Len(t, ratios, 1)
	fr := ratios[0]
	assert.InDelta(t, 3, fr.Overhead.P50Ms, 1e-9)
	assert.InDelta(t, 2, fr.Floor.P50Ms, 1e-9)
	assert.InDelta(t, 1.5, fr.P50, 1e-9)
	assert.InDelta(t, 2.5, fr.P99, 1e-9)
	assert.Nil(t, fr.P50Interval, "measured one after the other: no interval")
	assert.Nil(t, fr.P99Interval)
}

// TestFloorRatiosInTurnsResampleTheWindows: the control drifts from 5 to 16 ms over the step and
// the ladder and the floor drift with it, window by window (they ran in the same rounds); their
// overheads, 3 and 2 ms give or take 0.3, make a ratio of about 1.5 whose interval is narrow
// and holds it, the drift taken out.
func TestFloorRatiosInTurnsResampleTheWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7)) //nolint:gosec // G404: a fixed seed for reproducible synthetic windows
	control := make([]float64, 12)
	for i := range control {
		control[i] = 5 + float64(i)
	}
	ladder, floor := noisy(rng, 12, 3, 0.3), noisy(rng, 12, 2, 0.3)
	for i := range control {
		ladder[i] += control[i]
		floor[i] += control[i]
	}
	r := run("ab",
		throughAPIServer("apiserver/dgd", "apiserver/dgd-control", 100, 4, ladder, plus(ladder, 10)),
		throughAPIServer("apiserver/dgd-control", "", 100, 4, control, plus(control, 10)),
		throughAPIServer("apiserver/floor", "apiserver/dgd-control", 100, 4, floor, plus(floor, 10)),
	)
	ratios := r.FloorRatios("apiserver/dgd", "apiserver/floor")
	require.Len(t, ratios, 1)
	fr := ratios[0]
	assert.InDelta(t, 3, fr.Overhead.P50Ms, 0.3, "the median of the windows' overheads")
	assert.InDelta(t, 2, fr.Floor.P50Ms, 0.3)
	assert.InDelta(t, 1.5, fr.P50, 0.2)
	require.NotNil(t, fr.P50Interval)
	assert.True(t, fr.P50Interval.Contains(fr.P50), "%+v holds %v", *fr.P50Interval, fr.P50)
	assert.True(t, fr.P50Interval.Contains(1.5), "%+v", *fr.P50Interval)
	assert.Less(t, fr.P50Interval.High-fr.P50Interval.Low, 0.5, "%+v: the drift is taken out window by window", *fr.P50Interval)
	assert.Equal(t, fr, r.FloorRatios("apiserver/dgd", "apiserver/floor")[0], "the same result, the same interval")

	// Without the windows' pairing — the floor's windows in another order — the drift is noise.
	shuffled := r
	shuffled.Steps = append([]Step(nil), r.Steps...)
	f := shuffled.Steps[2]
	f.Windows = append([]Window(nil), f.Windows...)
	for i, j := 0, len(f.Windows)-1; i < j; i, j = i+1, j-1 {
		f.Windows[i], f.Windows[j] = f.Windows[j], f.Windows[i]
	}
	shuffled.Steps[2] = f
	wide := shuffled.FloorRatios("apiserver/dgd", "apiserver/floor")[0]
	require.NotNil(t, wide.P50Interval)
	assert.True(t, wide.P50Interval.Unbounded || wide.P50Interval.High-wide.P50Interval.Low > 1, "%+v", *wide.P50Interval)
}

func TestFloorRatiosOfAFloorLostInTheNoiseAreUnbounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3)) //nolint:gosec // G404: a fixed seed for reproducible synthetic windows
	control := noisy(rng, 12, 5, 0.1)
	ladder := plus(control, 2)
	floor := make([]float64, 12)
	for i := range floor {
		floor[i] = control[i] + 0.05*float64(i%3-1) // −0.05, 0, +0.05 ms
	}
	r := run("ab",
		throughAPIServer("apiserver/dgd", "apiserver/dgd-control", 100, 4, ladder, ladder),
		throughAPIServer("apiserver/dgd-control", "", 100, 4, control, control),
		throughAPIServer("apiserver/floor", "apiserver/dgd-control", 100, 4, floor, floor),
	)
	fr := r.FloorRatios("apiserver/dgd", "apiserver/floor")[0]
	assert.Zero(t, fr.P50, "no floor overhead, no ratio")
	if fr.P50Interval != nil {
		assert.True(t, fr.P50Interval.Unbounded, "%+v", *fr.P50Interval)
	}
	assert.Equal(t, GoalUnknown, Against(fr.P50, fr.P50Interval, 1.3))
}

func TestAgainstJudgesTheInterval(t *testing.T) {
	for _, c := range []struct {
		ratio float64
		iv    *Interval
		want  GoalVerdict
	}{
		{1.2, &Interval{Low: 1.0, High: 1.29}, GoalMet},
		{1.2, &Interval{Low: 1.0, High: 1.4}, GoalUndecided},
		{1.5, &Interval{Low: 1.31, High: 1.9}, GoalMissed},
		{1.5, &Interval{Low: 1.1, Unbounded: true}, GoalUndecided},
		{1.5, &Interval{Low: 1.4, Unbounded: true}, GoalMissed},
		{1.2, nil, GoalMet},
		{1.4, nil, GoalMissed},
		{0, &Interval{Low: 1, High: 2}, GoalUnknown},
	} {
		assert.Equal(t, c.want, Against(c.ratio, c.iv, 1.3), "%v %+v", c.ratio, c.iv)
	}
}

// sidesRun is one side's result of an A/B run: its ladder (control + overhead ± noise per
// window), and the control and floor shared by both sides.
func sidesRun(rng *rand.Rand, control, floor []float64, overhead float64) Result {
	ladder := noisy(rng, len(control), overhead, 0.4)
	for i := range ladder {
		ladder[i] += control[i]
	}
	return run("side",
		throughAPIServer("apiserver/dgd", "apiserver/dgd-control", 100, 4, ladder, plus(ladder, 5)),
		throughAPIServer("apiserver/dgd-control", "", 100, 4, control, plus(control, 5)),
		throughAPIServer("apiserver/floor", "apiserver/dgd-control", 100, 4, floor, plus(floor, 5)),
	)
}

func TestSidesRatiosAgreeOnAnAARunAndNotWhenBIsSlower(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11)) //nolint:gosec // G404: a fixed seed for reproducible synthetic windows
	control := noisy(rng, 12, 6, 1)
	floor := noisy(rng, 12, 2, 0.3)
	for i := range floor {
		floor[i] += control[i]
	}
	a := sidesRun(rng, control, floor, 3)

	same := SidesRatios(a, sidesRun(rng, control, floor, 3), "apiserver/dgd", "apiserver/floor")
	require.Len(t, same, 1)
	require.NotNil(t, same[0].P50Interval)
	assert.True(t, same[0].P50Interval.Contains(1), "A/A: %v %+v", same[0].P50, *same[0].P50Interval)

	slower := SidesRatios(a, sidesRun(rng, control, floor, 4.5), "apiserver/dgd", "apiserver/floor")
	require.Len(t, slower, 1)
	require.NotNil(t, slower[0].P50Interval)
	assert.InDelta(t, 1.5, slower[0].P50, 0.25)
	assert.Greater(t, slower[0].P50Interval.Low, 1.0, "B's overhead half as large again: %+v", *slower[0].P50Interval)

	noTurns := a
	noTurns.Steps = append([]Step(nil), a.Steps...)
	noTurns.Steps[1].Segments = 0
	assert.Empty(t, SidesRatios(noTurns, a, "apiserver/dgd", "apiserver/floor"), "without turns the windows do not pair")
}

// TestSidesRatiosOfAnAARunWhoseSegmentsDifferAgree is the A/A run of 2026-11-30 at 100 req/s in
// small: two identical sides whose overheads wander from segment to segment, each segment
// its own way (a side ahead in one, behind in the next), with little spread among the windows
// of a segment. Resampled window by window, the likeness inside a segment passed for precision
// and the two sides "disagreed"; resampled segment by segment, they agree.
func TestSidesRatiosOfAnAARunWhoseSegmentsDifferAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5)) //nolint:gosec // G404: a fixed seed for reproducible synthetic windows
	const segments, per = 8, 6
	// Each segment's overhead on side A and side B (ms): the same on average, B ahead in
	// five of eight segments.
	offA := []float64{2.1, 1.4, 2.4, 1.6, 1.1, 1.3, 1.2, 1.2}
	offB := []float64{1.9, 1.6, 2.3, 1.7, 2.2, 1.4, 1.4, 1.4}
	var control, floor, ladderA, ladderB []float64
	for k := range segments {
		for range per {
			c := 5 + 0.05*rng.Float64()
			control = append(control, c)
			floor = append(floor, c+1.4+0.05*rng.Float64())
			ladderA = append(ladderA, c+offA[k]+0.05*rng.Float64())
			ladderB = append(ladderB, c+offB[k]+0.05*rng.Float64())
		}
	}
	side := func(ladder []float64) Result {
		return run("side",
			throughAPIServer("apiserver/dgd", "apiserver/dgd-control", 100, segments, ladder, ladder),
			throughAPIServer("apiserver/dgd-control", "", 100, segments, control, control),
			throughAPIServer("apiserver/floor", "apiserver/dgd-control", 100, segments, floor, floor),
		)
	}
	ratios := SidesRatios(side(ladderA), side(ladderB), "apiserver/dgd", "apiserver/floor")
	require.Len(t, ratios, 1)
	require.NotNil(t, ratios[0].P50Interval)
	assert.Greater(t, ratios[0].P50, 1.1, "B's median overhead is the larger")
	assert.True(t, ratios[0].P50Interval.Contains(1), "the same code on both sides: %v %+v", ratios[0].P50, *ratios[0].P50Interval)
}
