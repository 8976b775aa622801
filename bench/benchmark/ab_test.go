package benchmark

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/gauntlet-dev/gauntlet/bench/load"
	"github.com/gauntlet-dev/gauntlet/bench/result"
)

// ladderOn is a workload named name whose requests go to srv.
func ladderOn(srv *httptest.Server, name string) load.Workload {
	return load.Workload{
		Spec:   result.StepSpec{Name: name, Mode: result.APIServer},
		Client: srv.Client(),
		Target: func(t *vegeta.Target) error { t.Method, t.URL = http.MethodPost, srv.URL; return nil },
	}
}

// TestClimbABRunsEachSidesReferencesInTurnsAndMarksThem is the two-cluster pairing: each side's
// control and floor go to that side's own cluster, interleaved like the webhook ladder, and
// are marked Reference (stated, not judged); the webhook ladder is judged.
func TestClimbABRunsEachSidesReferencesInTurnsAndMarksThem(t *testing.T) {
	served := map[string]*atomic.Int64{"a": {}, "b": {}}
	cluster := func(side string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			served[side].Add(1)
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "{}")
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	a, b := cluster("a"), cluster("b")
	names := []string{APIServerTarget, APIServerTargetCtl, APIServerFloor}
	var sideA, sideB []load.Workload
	for _, n := range names {
		sideA, sideB = append(sideA, ladderOn(a, n)), append(sideB, ladderOn(b, n))
	}
	cfg := Config{Segments: 2, SegmentWarmup: 10 * time.Millisecond}
	opts := load.StepOptions{Warmup: 20 * time.Millisecond, Duration: 200 * time.Millisecond, Windows: 2}
	steps := 0
	sa, sb, err := climbAB(context.Background(), cfg, []float64{50}, sideA, sideB, 1, nil, opts, load.Progress{W: io.Discard, Start: time.Now()}, &steps)
	require.NoError(t, err)
	require.Len(t, sa, 3)
	require.Len(t, sb, 3)
	for i, n := range names {
		assert.Equal(t, n, sa[i].Name)
		assert.Equal(t, n, sb[i].Name)
		assert.Equal(t, i > 0, sa[i].Reference, "%s on side A", n)
		assert.Equal(t, i > 0, sb[i].Reference, "%s on side B", n)
		assert.False(t, sa[i].Shared, "each side measured its own %s", n)
		assert.Equal(t, 2, sa[i].Segments, "%s ran in turns", n)
	}
	assert.Equal(t, 1, steps, "one rate: one set of turns")
	assert.True(t, result.InTurns(append(sa, sb...)...), "every ladder of both sides ran in the same rounds")
	assert.Positive(t, served["a"].Load(), "side A's cluster was loaded")
	assert.Positive(t, served["b"].Load(), "side B's cluster was loaded")
}

func TestEstimateABCountsEachSidesReferencesWhenSeparate(t *testing.T) {
	c := Config{APIServerRates: []float64{50}, Segments: 2, Warmup: time.Second, Duration: 4 * time.Second, SegmentWarmup: 500 * time.Millisecond}
	// each ladder: 4 s + 1 s + one segment warm-up. One cluster: both sides' webhook ladders, the
	// control and two floors once each.
	assert.Equal(t, 5*5500*time.Millisecond, c.EstimateAB(false, 2))
	// separate: each side's control and floor.
	assert.Equal(t, 6*5500*time.Millisecond, c.EstimateAB(true, 1))
	c.DirectRates = []float64{100}
	assert.Equal(t, 4*5500*time.Millisecond+6*5500*time.Millisecond, c.EstimateAB(true, 1), "validate and mutate on both sides")
}

func TestClimbABRefusesSidesMeasuringDifferentLadders(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	steps := 0
	_, _, err := climbAB(context.Background(), Config{Segments: 2}, []float64{50}, []load.Workload{ladderOn(srv, APIServerDGD)},
		[]load.Workload{ladderOn(srv, APIServerFloor)}, 1, nil, load.StepOptions{Duration: time.Second}, load.Progress{}, &steps)
	require.ErrorContains(t, err, "side A measures apiserver/dgd, side B apiserver/floor; both must measure the same ladder")
}
