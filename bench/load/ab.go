package load

import (
	"context"
	"fmt"
	"strings"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/gauntlet-dev/gauntlet/bench/result"
)

// ABOrders are the orders RunABStep measures the halves of the two sides in:
// A B B A, or B A A B. A linear drift of the machine's speed over the four
// halves (other work starting, a CPU warming up) then falls on both sides
// alike, and each half of one side runs right beside a half of the other.
// Alternating the two orders from step to step gives neither side the first
// half after a change of rate or ladder more often than the other.
var ABOrders = [2][4]int{{0, 1, 1, 0}, {1, 0, 0, 1}}

// RunABStep measures the same kind of request on side A (a) and side B (b)
// at rate, interleaved in ABOrders[order%2]: each side's measured attack is cut in two
// halves of opts.Duration/2 with opts.Windows/2 windows each (at least one),
// every half after its own warm-up of opts.Warmup. Each side's step merges
// its halves; A's windows and B's windows line up in time — A's first half
// beside B's first, A's second beside B's second — which is what
// result.CompareAB pairs.
func RunABStep(ctx context.Context, a, b Workload, rate float64, opts StepOptions, order int, progress Progress) (sa, sb result.Step, err error) {
	half := opts
	half.Duration = opts.Duration / 2
	half.Windows = max(1, opts.Windows/2)
	sides := [2]*abSide{{w: a, name: sideNames[0]}, {w: b, name: sideNames[1]}}
	for i, s := range sides {
		if s.spec, err = stepSpec(s.w, rate, half); err != nil {
			return result.Step{}, result.Step{}, err
		}
		if i == 1 && s.spec.Name != sides[0].spec.Name {
			return result.Step{}, result.Step{}, fmt.Errorf("A/B step @ %g req/s: side A measures %s, side B %s; both must measure the same ladder", rate, sides[0].spec.Name, s.spec.Name)
		}
		s.merged = &vegeta.Metrics{}
	}
	halves := ABOrders[order%2]
	progress.Printf("%s @ %g req/s: %s, each half %s after a %s warm-up …", a.Spec.Name, rate, orderText(halves), half.Duration, half.Warmup)
	for _, i := range halves {
		s := sides[i]
		p, err := measurePart(ctx, s.w, s.spec, half, s.merged)
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

// orderText is "A B B A" for halves {0, 1, 1, 0}.
func orderText(halves [4]int) string {
	names := make([]string, len(halves))
	for i, side := range halves {
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

// merge is the side's step: the percentiles of every request of its halves,
// the halves' windows one after the other (the second half's starting where
// the first one's end), its rates over the time its halves ran (not over the
// time between them, when the other side ran), and what the probes saw during
// the halves.
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
	return st
}
