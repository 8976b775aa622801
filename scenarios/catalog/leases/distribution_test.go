package leases

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

func TestKilledTooLateOnlyWhenTheReleaseCameBeforeTheKill(t *testing.T) {
	kill := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	for _, c := range []struct {
		name     string
		how      stopKind
		released time.Time
		want     bool
	}{
		{"no release: the kill came first", sigkilled, time.Time{}, false},
		{"released before the kill: SIGTERM came first", sigkilled, kill.Add(-300 * time.Millisecond), true},
		// A release after the kill was asked means the kill did not take: a failure, not a redo.
		{"released after the kill", sigkilled, kill.Add(300 * time.Millisecond), false},
		{"a graceful stop releases by design", graceful, kill.Add(-300 * time.Millisecond), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, killedTooLate(failover{how: c.how, stoppedAt: kill, released: c.released}))
		})
	}
}

func TestReleasedAtIsThePodsOwnReleaseLine(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)
	entries := []logEntry{
		{Pod: "b-old", Msg: msgReleased, Time: logTime{at.Add(-time.Minute)}},
		{Pod: "b-1", Msg: "renewed the namespace lock Lease", Time: logTime{at.Add(-time.Second)}},
		{Pod: "b-1", Msg: msgReleased, Time: logTime{at}},
	}
	assert.Equal(t, at, releasedAt(entries, "b-1"))
	assert.True(t, releasedAt(entries, "b-2").IsZero())
}

func TestSameMediansAllowsTheRunToRunSpread(t *testing.T) {
	// Takeovers of a killed operator with 6 s + 2 s timings fall between 6 and 8 s.
	seq := []float64{6.1, 6.4, 6.6, 6.9, 7.0, 7.2, 7.4, 7.6, 7.8, 7.9}
	diff, spread, ok := sameMedians(seq, []float64{6.2, 6.5, 6.8, 7.0, 7.1, 7.4, 7.5, 7.7, 7.8, 8.0})
	assert.True(t, ok, "diff %.3f spread %.3f", diff, spread)
	assert.InDelta(t, 1.0, spread, 0.01) // upper half's median 7.6 less lower half's 6.6

	diff, spread, ok = sameMedians(seq, []float64{8.1, 8.4, 8.6, 8.9, 9.0, 9.2, 9.4, 9.6, 9.8, 9.9})
	assert.False(t, ok, "a shift of 2 s is more than the spread")
	assert.InDelta(t, 2.0, diff, 0.001)
	assert.InDelta(t, 1.0, spread, 0.01)
}

func TestIQR(t *testing.T) {
	assert.Zero(t, iqr([]float64{3}))
	assert.InDelta(t, 3.0, iqr([]float64{1, 2, 3, 4, 5}), 1e-9)    // halves {1, 2} and {4, 5}, the median left out
	assert.InDelta(t, 3.0, iqr([]float64{1, 2, 3, 4, 5, 6}), 1e-9) // halves {1, 2, 3} and {4, 5, 6}
}

// Every kind of P5 stops operators of its own, so that the kinds can run at once: B for one of
// them, and for the others releases with B's values, each restricted to its own namespace.
func TestDistributionOperatorsAreEachKindsOwn(t *testing.T) {
	timings := chart.LeaseTimings{Duration: 6 * time.Second, RenewInterval: 2 * time.Second, GracePeriod: 2 * time.Second}
	s := &scenarios{topo: release.NewTopology(timings)}
	ops := s.distributionOperators()

	seen := map[string]string{}
	for _, k := range distributionKinds {
		assert.NotEmpty(t, k.namespaces, "kind %s stops no operator", k.key)
		for _, ns := range k.namespaces {
			assert.NotContains(t, seen, ns, "kinds %s and %s share the operator of namespace %q", seen[ns], k.key, ns)
			seen[ns] = k.key
		}
	}
	assert.Equal(t, s.opB(), ops[""])
	assert.Equal(t, []string{"p5-freeze-1", "p5-freeze-2", "p5-term"}, added(ops))
	for _, ns := range added(ops) {
		assert.Equal(t, ns, ops[ns].rel.RestrictedNamespace())
		assert.Equal(t, s.opA(), ops[ns].a)
		got, err := chart.LeaseTimingsOf(ops[ns].rel)
		require.NoError(t, err)
		assert.Equal(t, timings, got, "%s runs with B's lease timings", ops[ns])
	}
}

// M4, M5 and M12 run at once, each stopping a restricted operator of its own with B's values:
// none of them shares an operator with another, with B or with P5.
func TestFailoversAtOnceStopOperatorsOfTheirOwn(t *testing.T) {
	timings := chart.LeaseTimings{Duration: 6 * time.Second, RenewInterval: 2 * time.Second, GracePeriod: 2 * time.Second}
	s := &scenarios{topo: release.NewTopology(timings)}
	taken := map[string]string{release.TeamANamespace: "B"}
	for _, ns := range added(s.distributionOperators()) {
		taken[ns] = "P5"
	}
	for _, id := range []string{"M4", "M5", "M12"} {
		own := s.ownOperator(id)
		ns := own.rel.RestrictedNamespace()
		assert.NotContains(t, taken, ns, "%s and %s share the operator of namespace %q", id, taken[ns], ns)
		taken[ns] = id
		assert.Equal(t, ns, own.rel.Namespace, "%s's operator is installed in the namespace it serves", id)
		assert.Equal(t, s.opA(), own.a)
		got, err := chart.LeaseTimingsOf(own.rel)
		require.NoError(t, err)
		assert.Equal(t, timings, got, "%s runs with B's lease timings", own)
	}
}

// The suite runs neighbours with the same at-once label together: M4, M5 and M12 are next to
// each other, and no other scenario of the list is in their group.
func TestFailoversAtOnceAreNeighbours(t *testing.T) {
	var group []string
	for i, f := range Features(release.NewTopology(chart.DefaultLeaseTimings()), &QuickPlan) {
		if slices.Contains(f.Labels()[suite.LabelAtOnce], failoversAtOnce) {
			group = append(group, fmt.Sprintf("%d:%s", i, f.Labels()[suite.LabelScenario][0]))
		}
	}
	assert.Equal(t, []string{"4:M4", "5:M5", "6:M12"}, group)
}
