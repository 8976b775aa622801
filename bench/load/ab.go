package load

import (
	"context"
	"fmt"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/gauntlet-dev/gauntlet/bench/result"
)

// ABPlan is how RunABStep interleaves the two sides of a step.
type ABPlan struct {
	// Segments is how many segments each side's measured attack is cut into:
	// even, at least 2. The sides take turns in pairs of segments, A B B A
	// A B B A … (or B A A B …, see Order), so a linear drift of the machine's
	// speed over any four adjacent segments falls on both sides alike, and a
	// stall of the machine longer than a segment lands on both. More, shorter
	// segments tolerate longer stalls (result.CompareAB asks a growth to show
	// in most segment pairs).
	Segments int
	// SegmentWarmup is the uncounted warm-up before every segment but each
	// side's first, which gets StepOptions.Warmup: it refills the connections
	// of a side that sat idle while the other one ran.
	SegmentWarmup time.Duration
	// Order is the step's place in the run: even steps start with A, odd ones
	// with B, so neither side gets the first segment after a change of rate
	// or ladder more often than the other.
	Order int
}

// ValidSegments reports whether n segments per side can take turns in pairs
// (A B B A): n is even and at least 2.
func ValidSegments(n int) bool { return n >= 2 && n%2 == 0 }

// sequence is the side (0: A, 1: B) of each of the 2 × Segments segments in
// the order they run: A B B A A B B A … for an even Order.
func (p ABPlan) sequence() []int {
	first := p.Order % 2
	seq := make([]int, 0, 2*p.Segments)
	for range p.Segments / 2 {
		seq = append(seq, first, 1-first, 1-first, first)
	}
	return seq
}

// RunABStep measures the same kind of request on side A (a) and side B (b)
// at rate, interleaved as plan says: each side's measured attack of
// opts.Duration is cut into plan.Segments segments with opts.Windows/Segments
// windows each (at least one). Each side's step merges its segments; A's
// windows and B's windows line up in time — A's k-th segment beside B's k-th
// — which is what result.CompareAB pairs.
func RunABStep(ctx context.Context, a, b Workload, rate float64, opts StepOptions, plan ABPlan, progress Progress) (sa, sb result.Step, err error) {
	if !ValidSegments(plan.Segments) {
		return result.Step{}, result.Step{}, fmt.Errorf("A/B step @ %g req/s: %d segments per side; it must be even and at least 2", rate, plan.Segments)
	}
	segment := opts
	segment.Duration = opts.Duration / time.Duration(plan.Segments)
	segment.Windows = max(1, opts.Windows/plan.Segments)
	sides := [2]*abSide{{w: a, name: sideNames[0]}, {w: b, name: sideNames[1]}}
	for i, s := range sides {
		if s.spec, err = stepSpec(s.w, rate, segment); err != nil {
			return result.Step{}, result.Step{}, err
		}
		if i == 1 && s.spec.Name != sides[0].spec.Name {
			return result.Step{}, result.Step{}, fmt.Errorf("A/B step @ %g req/s: side A measures %s, side B %s; both must measure the same ladder", rate, sides[0].spec.Name, s.spec.Name)
		}
		s.merged = &vegeta.Metrics{}
	}
	seq := plan.sequence()
	progress.Printf("%s @ %g req/s: %s, each segment %s after a warm-up (%s before a side's first, %s before the others) …",
		a.Spec.Name, rate, orderText(seq), segment.Duration, opts.Warmup, plan.SegmentWarmup)
	for _, i := range seq {
		s := sides[i]
		part := segment
		if len(s.parts) > 0 {
			part.Warmup = plan.SegmentWarmup
		}
		p, err := measurePart(ctx, s.w, s.spec, part, s.merged)
		if err != nil {
			return result.Step{}, result.Step{}, fmt.Errorf("side %s: %w", s.name, err)
		}
		s.parts = append(s.parts, p)
	}
	for _, s := range sides {
		s.step = s.merge()
		progress.Printf("%s", stepLine(s.step, " ["+s.name+"]"))
	}
	return sides[0].step, sides[1].step, nil
}

// orderText is "A B B A" for the sequence {0, 1, 1, 0}.
func orderText(seq []int) string {
	names := make([]string, len(seq))
	for i, side := range seq {
		names[i] = sideNames[side]
	}
	return strings.Join(names, " ")
}

// sideNames are the sides' names by index.
var sideNames = [2]string{"A", "B"}

// abSide is one side of an A/B step while it is measured.
type abSide struct {
	w      Workload
	name   string
	spec   result.StepSpec
	merged *vegeta.Metrics
	parts  []part
	step   result.Step
}

// merge is the side's step: the percentiles of every request of its
// segments, the segments' windows one after the other (each segment's
// starting where the previous one's end), its rates over the time its
// segments ran (not over the time between them, when the other side ran), and
// what the probes saw during the segments.
func (s *abSide) merge() result.Step {
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
