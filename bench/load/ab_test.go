package load

import (
	"context"
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

func TestRunABStepInterleavesABBAAndMergesEachSidesHalves(t *testing.T) {
	srvA, servedA := dryRunServer(t, func(int64) bool { return true })
	srvB, servedB := dryRunServer(t, func(int64) bool { return true })
	a, timesA := sentAt(dryRunWorkload(t, srvA, true))
	b, timesB := sentAt(dryRunWorkload(t, srvB, true))
	var out strings.Builder
	sa, sb, err := RunABStep(context.Background(), a, b, 200,
		StepOptions{Warmup: 100 * time.Millisecond, Duration: time.Second, Windows: 4}, 0, Progress{W: &out, Start: time.Now()})
	require.NoError(t, err)

	// vegeta may send a request or two less than rate × duration on a busy machine.
	for side, got := range map[string]struct{ served, step float64 }{
		"A": {float64(servedA.Load()), float64(sa.Requests)}, "B": {float64(servedB.Load()), float64(sb.Requests)},
	} {
		assert.InDelta(t, 200, got.step, 4, "side %s: both halves of 100 requests are counted", side)
		assert.InDelta(t, 2*20, got.served-got.step, 4, "side %s: the two warm-ups of 20 requests ran and are not counted", side)
	}
	assert.Equal(t, "apiserver/widgets@200", sa.Key())
	assert.Equal(t, sa.Key(), sb.Key())
	assert.Len(t, sa.Windows, 4, "two windows per half")
	assert.Len(t, sb.Windows, 4)
	assert.InDelta(t, 0.5, sa.Windows[2].StartSeconds, 0.05, "the second half's windows follow the first's")
	assert.InDelta(t, 200, sa.AchievedRate, 10, "the rate over the time A's halves ran, not over B's halves in between")
	assert.InDelta(t, 1.0, sa.SuccessRatio, 1e-9)
	require.Len(t, sa.ServerHistograms, 1)
	assert.Equal(t, sa.Requests, sa.ServerHistograms[0].Count, "what the server saw during both measured halves, and only then")

	ta, tb := timesA(), timesB()
	require.NotEmpty(t, ta)
	require.NotEmpty(t, tb)
	assert.True(t, ta[0].Before(tb[0]), "A starts")
	assert.True(t, tb[len(tb)-1].Before(ta[len(ta)-1]), "A ends: A B B A")
	var aBetween int
	for _, at := range ta {
		if at.After(tb[0]) && at.Before(tb[len(tb)-1]) {
			aBetween++
		}
	}
	assert.Zero(t, aBetween, "nothing of A runs while B's two halves run")
	assert.Contains(t, out.String(), "apiserver/widgets @ 200 req/s: A B B A, each half 500ms after a 100ms warm-up …")
	assert.Contains(t, out.String(), "apiserver/widgets [A] @ 200 req/s: p50 ")
	assert.Contains(t, out.String(), "apiserver/widgets [B] @ 200 req/s: p50 ")
}

func TestRunABStepRefusesDifferentLadders(t *testing.T) {
	srv, _ := dryRunServer(t, func(int64) bool { return true })
	a := dryRunWorkload(t, srv, true)
	b := a
	b.Spec.Name = "apiserver/other"
	_, _, err := RunABStep(context.Background(), a, b, 100, StepOptions{Duration: time.Second}, 0, Progress{})
	require.ErrorContains(t, err, "side A measures apiserver/widgets, side B apiserver/other; both must measure the same ladder")
}

func TestRunABStepAlternatesTheOrder(t *testing.T) {
	srvA, _ := dryRunServer(t, func(int64) bool { return true })
	srvB, _ := dryRunServer(t, func(int64) bool { return true })
	a, timesA := sentAt(dryRunWorkload(t, srvA, true))
	b, timesB := sentAt(dryRunWorkload(t, srvB, true))
	var out strings.Builder
	_, _, err := RunABStep(context.Background(), a, b, 200, StepOptions{Duration: 200 * time.Millisecond}, 1, Progress{W: &out, Start: time.Now()})
	require.NoError(t, err)
	ta, tb := timesA(), timesB()
	require.NotEmpty(t, ta)
	require.NotEmpty(t, tb)
	assert.True(t, tb[0].Before(ta[0]), "B starts")
	assert.True(t, ta[len(ta)-1].Before(tb[len(tb)-1]), "B ends: B A A B")
	assert.Contains(t, out.String(), "apiserver/widgets @ 200 req/s: B A A B, each half 100ms after a 0s warm-up …")
}
