package load

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/gauntlet-dev/gauntlet/bench/result"
)

// TurnPlan is how RunTurns interleaves the workloads of a step.
type TurnPlan struct {
	// Segments is how many segments each workload's measured attack is cut
	// into: even, at least 2. The workloads take turns in rounds, every one
	// once per round, forward and then back: A B B A A B B A … for two,
	// A B C D D C B A … for four (or starting backward, see Order). A linear
	// drift of the machine's speed over two adjacent rounds falls on every
	// workload alike, and a stall of the machine longer than a segment lands
	// on several. More, shorter segments tolerate longer stalls
	// (result.CompareAB asks a growth to show in most segment pairs).
	Segments int
	// SegmentWarmup is the uncounted warm-up before every segment but each
	// workload's first, which gets StepOptions.Warmup: it refills the
	// connections of a workload that sat idle while the others ran.
	SegmentWarmup time.Duration
	// Order is the step's place in the run: even steps start forward, odd
	// ones backward, so no workload gets the first segment after a change of
	// rate more often than another.
	Order int
}

// ValidSegments reports whether n segments per workload can take turns
// forward and back (A B B A): n is even and at least 2.
func ValidSegments(n int) bool { return n >= 2 && n%2 == 0 }

// sequence is the index of the workload of each of the n × Segments segments
// in the order they run: 0 1 1 0 0 1 1 0 … for two workloads and an even
// Order.
func (p TurnPlan) sequence(n int) []int {
	forward := make([]int, n)
	for i := range forward {
		forward[i] = i
	}
	if p.Order%2 == 1 {
		slices.Reverse(forward)
	}
	back := slices.Clone(forward)
	slices.Reverse(back)
	seq := make([]int, 0, n*p.Segments)
	for range p.Segments / 2 {
		seq = append(append(seq, forward...), back...)
	}
	return seq
}

// A Turn is one workload of a step measured in turns (RunTurns).
type Turn struct {
	// Side is the A/B side the workload measures ("A", "B"), or empty for a
	// workload measured once for both sides (a control, the floor).
	Side     string
	Workload Workload
}

// name is how the progress lines call t among turns: its side when it measures
// the first turn's ladder, else its ladder, followed by its side if it has one.
func (t Turn) name(first Turn) string {
	switch {
	case t.Side != "" && t.Workload.Spec.Name == first.Workload.Spec.Name:
		return t.Side
	case t.Side != "":
		return t.Workload.Spec.Name + " " + t.Side
	default:
		return t.Workload.Spec.Name
	}
}

// RunTurns measures every turn's workload at rate, the workloads taking turns
// as plan says: each one's measured attack of opts.Duration is cut into
// plan.Segments segments with opts.Windows/Segments windows each (at least
// one). It returns a step per turn, in the order of turns, each merging its
// workload's segments. The k-th segments of all turns ran in the same round
// (forward or back), so their windows line up in time: what result.CompareAB
// pairs (side A's window beside side B's) and what result.FloorRatios
// resamples (the webhook's, the control's and the floor's windows together).
func RunTurns(ctx context.Context, turns []Turn, rate float64, opts StepOptions, plan TurnPlan, progress Progress) ([]result.Step, error) {
	if len(turns) == 0 {
		return nil, fmt.Errorf("step @ %g req/s: no workload to measure", rate)
	}
	if !ValidSegments(plan.Segments) {
		return nil, fmt.Errorf("step %s @ %g req/s: %d segments per workload; it must be even and at least 2", turns[0].Workload.Spec.Name, rate, plan.Segments)
	}
	segment := opts
	segment.Duration = opts.Duration / time.Duration(plan.Segments)
	segment.Windows = max(1, opts.Windows/plan.Segments)
	ws := make([]*inTurns, len(turns))
	names := make([]string, len(turns))
	for i, t := range turns {
		spec, err := stepSpec(t.Workload, rate, segment)
		if err != nil {
			return nil, err
		}
		ws[i] = &inTurns{Turn: t, spec: spec, merged: &vegeta.Metrics{}}
		names[i] = t.name(turns[0])
	}
	seq := plan.sequence(len(turns))
	forward := make([]string, len(turns))
	for i, w := range seq[:len(turns)] {
		forward[i] = names[w]
	}
	progress.Printf("%s @ %g req/s: in turns %s and back, ×%d, each segment %s after a warm-up (%s before a workload's first, %s before the others) …",
		turns[0].Workload.Spec.Name, rate, strings.Join(forward, " "), plan.Segments/2, segment.Duration, opts.Warmup, plan.SegmentWarmup)
	for _, i := range seq {
		w := ws[i]
		part := segment
		if len(w.parts) > 0 {
			part.Warmup = plan.SegmentWarmup
		}
		p, err := measurePart(ctx, w.Workload, w.spec, part, w.merged)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
		w.parts = append(w.parts, p)
	}
	steps := make([]result.Step, len(ws))
	for i, w := range ws {
		steps[i] = w.merge()
		label := ""
		if w.Side != "" {
			label = " [" + w.Side + "]"
		}
		progress.Printf("%s", stepLine(steps[i], label))
	}
	return steps, nil
}

// inTurns is one turn of a step while it is measured.
type inTurns struct {
	Turn
	spec   result.StepSpec
	merged *vegeta.Metrics
	parts  []part
}

// merge is the turn's step: the percentiles of every request of its
// segments, the segments' windows one after the other (each segment's
// starting where the previous one's end), its rates over the time its
// segments ran (not over the time between them, when the others ran), and
// what the probes saw during the segments.
func (s *inTurns) merge() result.Step {
	st := result.FromMetrics(s.spec, s.merged)
	st.Windows = nil
	var succeeded int
	var sent, answered float64 // seconds sending requests, and until the last answer
	var before, after [][]Snapshot
	for _, p := range s.parts {
		offset := sent
		for _, w := range p.outcome.windows {
			w.StartSeconds += offset
			st.Windows = append(st.Windows, w)
		}
		m := p.outcome.metrics
		sent += m.Duration.Seconds()
		answered += (m.Duration + m.Wait).Seconds()
		succeeded += p.outcome.succeeded
		before, after = append(before, p.before), append(after, p.after)
	}
	st.DurationSeconds = sent
	if sent > 0 {
		st.AchievedRate = float64(st.Requests) / sent
	}
	if st.Requests > 0 {
		st.SuccessRatio = float64(succeeded) / float64(st.Requests)
	}
	if answered > 0 {
		st.Throughput = float64(succeeded) / answered
	}
	st.ServerHistograms = SinceParts(before, after)
	st.Segments = len(s.parts)
	return st
}
