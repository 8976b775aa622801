package load

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// sentAt wraps w's targeter to record when each of its requests was built.
func sentAt(w Workload) (Workload, func() []time.Time) {
	var mu sync.Mutex
	var times []time.Time
	inner := w.Target
	w.Target = func(t *vegeta.Target) error {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		return inner(t)
	}
	return w, func() []time.Time { mu.Lock(); defer mu.Unlock(); return append([]time.Time(nil), times...) }
}

func TestRunABStepInterleavesABBAAndMergesEachSidesSegments(t *testing.T) {
	srvA, servedA := dryRunServer(t, func(int64) bool { return true })
	srvB, servedB := dryRunServer(t, func(int64) bool { return true })
	a, timesA := sentAt(dryRunWorkload(t, srvA, true))
	b, timesB := sentAt(dryRunWorkload(t, srvB, true))
	var out strings.Builder
	sa, sb, err := RunABStep(context.Background(), a, b, 200,
		StepOptions{Warmup: 100 * time.Millisecond, Duration: time.Second, Windows: 8},
		ABPlan{Segments: 4, SegmentWarmup: 50 * time.Millisecond}, Progress{W: &out, Start: time.Now()})
	require.NoError(t, err)

	// vegeta may send a request or two less than rate × duration on a busy machine.
	for side, got := range map[string]struct{ served, step float64 }{
		"A": {float64(servedA.Load()), float64(sa.Requests)}, "B": {float64(servedB.Load()), float64(sb.Requests)},
	} {
		assert.InDelta(t, 200, got.step, 6, "side %s: the four segments of 50 requests are counted", side)
		assert.InDelta(t, 20+3*10, got.served-got.step, 6, "side %s: the first warm-up (20 requests) and the three short ones (10 each) ran and are not counted", side)
	}
	assert.Equal(t, "apiserver/widgets@200", sa.Key())
	assert.Equal(t, sa.Key(), sb.Key())
	assert.Len(t, sa.Windows, 8, "two windows per segment")
	assert.Len(t, sb.Windows, 8)
	assert.Equal(t, 4, sa.Segments)
	assert.Equal(t, 4, sb.Segments)
	assert.InDelta(t, 0.25, sa.Windows[2].StartSeconds, 0.05, "the second segment's windows follow the first's")
	assert.InDelta(t, 0.75, sa.Windows[6].StartSeconds, 0.05)
	assert.InDelta(t, 200, sa.AchievedRate, 10, "the rate over the time A's segments ran, not over B's segments in between")
	assert.InDelta(t, 1.0, sa.SuccessRatio, 1e-9)
	require.Len(t, sa.ServerHistograms, 1)
	assert.Equal(t, sa.Requests, sa.ServerHistograms[0].Count, "what the server saw during the measured segments, and only then")

	assert.Equal(t, "A B B A A B B A", runsOf(timesA(), timesB()), "the sides took turns, in pairs")
	assert.Contains(t, out.String(), "apiserver/widgets @ 200 req/s: A B B A A B B A, each segment 250ms after a warm-up (100ms before a side's first, 50ms before the others) …")
	assert.Contains(t, out.String(), "apiserver/widgets [A] @ 200 req/s: p50 ")
	assert.Contains(t, out.String(), "apiserver/widgets [B] @ 200 req/s: p50 ")
}

func TestRunABStepRefusesDifferentLadders(t *testing.T) {
	srv, _ := dryRunServer(t, func(int64) bool { return true })
	a := dryRunWorkload(t, srv, true)
	b := a
	b.Spec.Name = "apiserver/other"
	_, _, err := RunABStep(context.Background(), a, b, 100, StepOptions{Duration: time.Second}, ABPlan{Segments: 2}, Progress{})
	require.ErrorContains(t, err, "side A measures apiserver/widgets, side B apiserver/other; both must measure the same ladder")
}

func TestRunABStepRefusesAnOddOrTooSmallSegmentCount(t *testing.T) {
	srv, _ := dryRunServer(t, func(int64) bool { return true })
	w := dryRunWorkload(t, srv, true)
	for _, n := range []int{0, 1, 3} {
		_, _, err := RunABStep(context.Background(), w, w, 100, StepOptions{Duration: time.Second}, ABPlan{Segments: n}, Progress{})
		require.ErrorContains(t, err, "segments per side; it must be even and at least 2", "%d segments", n)
	}
}

func TestRunABStepAlternatesTheOrder(t *testing.T) {
	srvA, _ := dryRunServer(t, func(int64) bool { return true })
	srvB, _ := dryRunServer(t, func(int64) bool { return true })
	a, timesA := sentAt(dryRunWorkload(t, srvA, true))
	b, timesB := sentAt(dryRunWorkload(t, srvB, true))
	var out strings.Builder
	_, _, err := RunABStep(context.Background(), a, b, 200, StepOptions{Duration: 200 * time.Millisecond},
		ABPlan{Segments: 2, Order: 1}, Progress{W: &out, Start: time.Now()})
	require.NoError(t, err)
	assert.Equal(t, "B A A B", runsOf(timesA(), timesB()))
	assert.Contains(t, out.String(), "apiserver/widgets @ 200 req/s: B A A B, each segment 100ms after a warm-up (0s before a side's first, 0s before the others) …")
}

// runsOf is the order the two sides sent in: a letter per run of one side's
// requests, every inner run written twice — two segments of one side back to
// back are one run of requests — so the pattern A B B A reads "A B B A".
func runsOf(a, b []time.Time) string {
	type sent struct {
		at   time.Time
		side string
	}
	var all []sent
	for _, t := range a {
		all = append(all, sent{t, "A"})
	}
	for _, t := range b {
		all = append(all, sent{t, "B"})
	}
	slices.SortFunc(all, func(x, y sent) int { return x.at.Compare(y.at) })
	var runs []string
	for _, s := range all {
		if len(runs) == 0 || runs[len(runs)-1] != s.side {
			runs = append(runs, s.side)
		}
	}
	// Every inner run is two segments of one side back to back.
	var out []string
	for i, r := range runs {
		out = append(out, r)
		if i > 0 && i < len(runs)-1 {
			out = append(out, r)
		}
	}
	return strings.Join(out, " ")
}
