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

// sides are turns of workloads a and b as sides A and B.
func sides(a, b Workload) []Turn { return []Turn{{Side: "A", Workload: a}, {Side: "B", Workload: b}} }

func TestRunTurnsInterleavesABBAAndMergesEachSidesSegments(t *testing.T) {
	srvA, servedA := dryRunServer(t, func(int64) bool { return true })
	srvB, servedB := dryRunServer(t, func(int64) bool { return true })
	a, timesA := sentAt(dryRunWorkload(t, srvA, true))
	b, timesB := sentAt(dryRunWorkload(t, srvB, true))
	var out strings.Builder
	steps, err := RunTurns(context.Background(), sides(a, b), 200,
		StepOptions{Warmup: 100 * time.Millisecond, Duration: time.Second, Windows: 8},
		TurnPlan{Segments: 4, SegmentWarmup: 50 * time.Millisecond}, Progress{W: &out, Start: time.Now()})
	require.NoError(t, err)
	require.Len(t, steps, 2)
	sa, sb := steps[0], steps[1]

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

	assert.Equal(t, "A B B A A B B A", runsOf(map[string][]time.Time{"A": timesA(), "B": timesB()}), "the sides took turns, in pairs")
	assert.Contains(t, out.String(), "apiserver/widgets @ 200 req/s: in turns A B and back, ×2, each segment 250ms after a warm-up (100ms before a workload's first, 50ms before the others) …")
	assert.Contains(t, out.String(), "apiserver/widgets [A] @ 200 req/s: p50 ")
	assert.Contains(t, out.String(), "apiserver/widgets [B] @ 200 req/s: p50 ")
}

// TestRunTurnsRunsTheControlAndTheFloorInTheSameRounds: ladders measured for both sides take
// their turns in the same rounds, forward and back, so that window i of each ran beside window
// i of the sides.
func TestRunTurnsRunsTheControlAndTheFloorInTheSameRounds(t *testing.T) {
	servers := map[string]Workload{}
	times := map[string]func() []time.Time{}
	for _, n := range []string{"A", "B", "C", "F"} {
		srv, _ := dryRunServer(t, func(int64) bool { return true })
		servers[n], times[n] = sentAt(dryRunWorkload(t, srv, true))
	}
	control, floor := servers["C"], servers["F"]
	control.Spec.Name, floor.Spec.Name = "apiserver/widgets-control", "apiserver/floor"
	turns := append(sides(servers["A"], servers["B"]), Turn{Workload: control}, Turn{Workload: floor})
	var out strings.Builder
	steps, err := RunTurns(context.Background(), turns, 200, StepOptions{Duration: 400 * time.Millisecond, Windows: 4},
		TurnPlan{Segments: 2, Order: 1}, Progress{W: &out, Start: time.Now()})
	require.NoError(t, err)
	require.Len(t, steps, 4)
	for i, name := range []string{"apiserver/widgets", "apiserver/widgets", "apiserver/widgets-control", "apiserver/floor"} {
		assert.Equal(t, name, steps[i].Name)
		assert.Len(t, steps[i].Windows, 4, name)
		assert.Equal(t, 2, steps[i].Segments, name)
	}
	got := map[string][]time.Time{}
	for n, f := range times {
		got[n] = f()
	}
	assert.Equal(t, "F C B A A B C F", runsOf(got), "an odd order starts backward")
	assert.Contains(t, out.String(), "apiserver/widgets @ 200 req/s: in turns apiserver/floor apiserver/widgets-control B A and back, ×1")
	assert.Contains(t, out.String(), "apiserver/floor @ 200 req/s: p50 ", "a shared ladder's line has no side")
}

func TestRunTurnsRefusesAnOddOrTooSmallSegmentCount(t *testing.T) {
	srv, _ := dryRunServer(t, func(int64) bool { return true })
	w := dryRunWorkload(t, srv, true)
	for _, n := range []int{0, 1, 3} {
		_, err := RunTurns(context.Background(), sides(w, w), 100, StepOptions{Duration: time.Second}, TurnPlan{Segments: n}, Progress{})
		require.ErrorContains(t, err, "segments per workload; it must be even and at least 2", "%d segments", n)
	}
	_, err := RunTurns(context.Background(), nil, 100, StepOptions{Duration: time.Second}, TurnPlan{Segments: 2}, Progress{})
	require.ErrorContains(t, err, "no workload to measure")
}

func TestRunTurnsAlternatesTheOrder(t *testing.T) {
	srvA, _ := dryRunServer(t, func(int64) bool { return true })
	srvB, _ := dryRunServer(t, func(int64) bool { return true })
	a, timesA := sentAt(dryRunWorkload(t, srvA, true))
	b, timesB := sentAt(dryRunWorkload(t, srvB, true))
	var out strings.Builder
	_, err := RunTurns(context.Background(), sides(a, b), 200, StepOptions{Duration: 200 * time.Millisecond},
		TurnPlan{Segments: 2, Order: 1}, Progress{W: &out, Start: time.Now()})
	require.NoError(t, err)
	assert.Equal(t, "B A A B", runsOf(map[string][]time.Time{"A": timesA(), "B": timesB()}))
	assert.Contains(t, out.String(), "apiserver/widgets @ 200 req/s: in turns B A and back, ×1, each segment 100ms after a warm-up (0s before a workload's first, 0s before the others) …")
}

// runsOf is the order the workloads (requests sent, by name) sent in: a name
// per run of one workload's requests, every inner run written twice — two
// segments of one workload back to back are one run of requests — so the
// pattern A B B A reads "A B B A".
func runsOf(sent map[string][]time.Time) string {
	type request struct {
		at   time.Time
		name string
	}
	var all []request
	for name, times := range sent {
		for _, t := range times {
			all = append(all, request{t, name})
		}
	}
	slices.SortFunc(all, func(x, y request) int { return x.at.Compare(y.at) })
	var runs []string
	for _, s := range all {
		if len(runs) == 0 || runs[len(runs)-1] != s.name {
			runs = append(runs, s.name)
		}
	}
	// Every inner run at a turn back is two segments of one workload back to back.
	var out []string
	for i, r := range runs {
		out = append(out, r)
		if i > 0 && i < len(runs)-1 && (runs[i-1] == runs[i+1]) {
			out = append(out, r)
		}
	}
	return strings.Join(out, " ")
}
