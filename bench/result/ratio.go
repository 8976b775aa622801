package result

import (
	"math"
	"math/rand/v2"
	"slices"
)

// FloorRatio is, at one rate, the admission overhead of a webhook ladder as
// a multiple of the floor ladder's: how much more the operator's webhooks
// cost than the least any webhook behind a Service costs.
type FloorRatio struct {
	Rate float64 `json:"rate"`
	// Overhead and Floor are the two ladders' overheads over their control.
	// When the three ladders ran in turns (InTurns), each percentile is the
	// median over the windows of the window's percentile minus the control's
	// window beside it; otherwise the difference of the steps' percentiles.
	Overhead Overhead `json:"overhead"`
	Floor    Overhead `json:"floor"`
	// Ratios are Overhead ÷ Floor for each percentile, with their intervals
	// when the three ladders ran in turns.
	Ratios
}

// Ratios are a ratio at p50 and at p99, each 0 when its denominator was not
// positive (lost in the noise), so no ratio means anything, and each with its
// 95 % bootstrap interval (segments, then windows; see bootstrap) when the
// ladders ran in turns, nil otherwise.
type Ratios struct {
	P50         float64   `json:"p50"`
	P99         float64   `json:"p99"`
	P50Interval *Interval `json:"p50Interval,omitempty"`
	P99Interval *Interval `json:"p99Interval,omitempty"`
}

// Interval is a 95 % bootstrap interval of a ratio: the 2.5th and 97.5th
// percentiles of the ratio over resamples of the segments and their windows
// (see bootstrap).
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
	// Unbounded says the denominator came out zero or negative in more than
	// 2.5 % of the resamples: the ratio can be as large as anything, and High
	// means nothing.
	Unbounded bool `json:"unbounded,omitempty"`
}

// Contains reports whether v lies inside the interval.
func (iv Interval) Contains(v float64) bool {
	return v >= iv.Low && (iv.Unbounded || v <= iv.High)
}

// GoalVerdict is a ratio judged against the most it may be.
type GoalVerdict string

const (
	// GoalMet: the whole interval is at or under the goal.
	GoalMet GoalVerdict = "met"
	// GoalMissed: the whole interval is above the goal.
	GoalMissed GoalVerdict = "missed"
	// GoalUndecided: the interval straddles the goal; the run cannot tell.
	GoalUndecided GoalVerdict = "undecided"
	// GoalUnknown: no ratio (the floor's overhead was not positive).
	GoalUnknown GoalVerdict = "unknown"
)

// Against judges ratio, with its interval iv (nil: none, the ratio alone
// decides), against goal, the largest ratio that meets it.
func Against(ratio float64, iv *Interval, goal float64) GoalVerdict {
	switch {
	case ratio == 0:
		return GoalUnknown
	case iv == nil && ratio <= goal, iv != nil && !iv.Unbounded && iv.High <= goal:
		return GoalMet
	case iv == nil, iv.Low > goal:
		return GoalMissed
	default:
		return GoalUndecided
	}
}

// FloorRatios relates ladder name's overhead to ladder floor's at every rate
// both measured (with their control).
func (r Result) FloorRatios(name, floor string) []FloorRatio {
	var out []FloorRatio
	for _, s := range r.Steps {
		if s.Name != name || s.Mode != APIServer {
			continue
		}
		f, ok := r.step(floor, s.Rate)
		if !ok || f.Control != s.Control {
			continue
		}
		c, ok := r.ControlOf(s)
		if !ok {
			continue
		}
		out = append(out, floorRatio(s, f, c))
	}
	return out
}

// floorRatio is s's overhead over control c as a multiple of floor f's.
func floorRatio(s, f, c Step) FloorRatio {
	if !InTurns(s, f, c) {
		fr := FloorRatio{Rate: s.Rate, Overhead: overheadOver(s, c), Floor: overheadOver(f, c)}
		fr.P50, fr.P99 = ratio(fr.Overhead.P50Ms, fr.Floor.P50Ms), ratio(fr.Overhead.P99Ms, fr.Floor.P99Ms)
		return fr
	}
	fr := FloorRatio{Rate: s.Rate,
		Overhead: Overhead{Name: s.Name, Control: c.Name, Rate: s.Rate},
		Floor:    Overhead{Name: f.Name, Control: c.Name, Rate: s.Rate}}
	p50 := overheads{s.WindowP50s(), f.WindowP50s(), c.WindowP50s()}
	p99 := overheads{s.WindowP99s(), f.WindowP99s(), c.WindowP99s()}
	all := indices(0, len(s.Windows))
	fr.Overhead.P50Ms, fr.Floor.P50Ms = p50.medians(all)
	fr.Overhead.P99Ms, fr.Floor.P99Ms = p99.medians(all)
	fr.P50, fr.P50Interval = bootstrap(segmentsOf(s), p50.ratio)
	fr.P99, fr.P99Interval = bootstrap(segmentsOf(s), p99.ratio)
	return fr
}

// segmentsOf is the indices of s's windows, segment by segment.
func segmentsOf(s Step) [][]int {
	per := len(s.Windows) / s.Segments
	out := make([][]int, s.Segments)
	for k := range out {
		out[k] = indices(k*per, (k+1)*per)
	}
	return out
}

// InTurns reports whether steps ran in turns with each other (load.RunTurns):
// each in segments of as many windows, window i of each in the same round.
func InTurns(steps ...Step) bool {
	for _, s := range steps {
		if s.Segments == 0 || s.Segments != steps[0].Segments || len(s.Windows) == 0 || len(s.Windows) != len(steps[0].Windows) ||
			len(s.Windows)%s.Segments != 0 {
			return false
		}
	}
	return true
}

// overheads are one percentile of the windows of a ladder, of its floor and
// of their control, which ran in turns (Step.WindowP50s, Step.WindowP99s).
type overheads struct {
	ladder, floor, control []float64
}

// medians are, over the windows at idx, the median of the ladder's window
// minus the control's beside it, and the same for the floor.
func (o overheads) medians(idx []int) (ladder, floor float64) {
	l, f := make([]float64, len(idx)), make([]float64, len(idx))
	for k, i := range idx {
		c := o.control[i]
		l[k], f[k] = o.ladder[i]-c, o.floor[i]-c
	}
	return median(l), median(f)
}

// ratio is the ladder's median overhead over the floor's at idx; NaN when the
// floor's is not positive.
func (o overheads) ratio(idx []int) float64 {
	l, f := o.medians(idx)
	if f <= 0 {
		return math.NaN()
	}
	return l / f
}

// SidesRatio is, at one rate, side B's floor ratio divided by side A's, with
// its bootstrap interval: when 1 lies inside it, the two sides' ratios agree
// within their spread, which an A/A run (the same code on both sides) must
// show.
type SidesRatio struct {
	Rate float64 `json:"rate"`
	Ratios
}

// SidesRatios relates side b's ratio of ladder to floor to side a's at every
// rate where both sides' ladder, floor and control ran in turns, resampling
// the segments of both sides together (window i of every ladder ran in the
// same round).
func SidesRatios(a, b Result, ladder, floor string) []SidesRatio {
	var out []SidesRatio
	for _, sa := range a.Steps {
		if sa.Name != ladder {
			continue
		}
		sb, ok1 := b.step(ladder, sa.Rate)
		fa, ok2 := a.step(floor, sa.Rate)
		fb, ok3 := b.step(floor, sa.Rate)
		ca, ok4 := a.ControlOf(sa)
		cb, ok5 := b.ControlOf(sb)
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !InTurns(sa, sb, fa, fb, ca, cb) {
			continue
		}
		sr := SidesRatio{Rate: sa.Rate}
		for _, p := range []struct {
			windows  func(Step) []float64
			ratio    *float64
			interval **Interval
		}{
			{Step.WindowP50s, &sr.P50, &sr.P50Interval},
			{Step.WindowP99s, &sr.P99, &sr.P99Interval},
		} {
			oa := overheads{p.windows(sa), p.windows(fa), p.windows(ca)}
			ob := overheads{p.windows(sb), p.windows(fb), p.windows(cb)}
			*p.ratio, *p.interval = bootstrap(segmentsOf(sa), func(idx []int) float64 {
				ra, rb := oa.ratio(idx), ob.ratio(idx)
				if math.IsNaN(ra) || math.IsNaN(rb) || ra <= 0 {
					return math.NaN()
				}
				return rb / ra
			})
		}
		out = append(out, sr)
	}
	return out
}

// resamples is how many times bootstrap resamples the segments.
const resamples = 2000

// bootstrap returns estimate over every window of segments (the windows'
// indices, segment by segment; 0 when the estimate is NaN: no ratio) and its
// 95 % percentile interval over resamples in two stages, drawn with
// replacement from a fixed seed, so a result's report is the same each time
// it is written: as many segments as there are, then in each as many of its
// windows as it has. The segments first: the windows of one segment ran back
// to back on a machine in one state, and resampling them one by one takes
// their likeness for precision — on A/A runs the two sides' ratios then
// "disagreed" (TestSidesRatiosOfAnAARunWhoseSegmentsDifferAgree). The windows
// second: with 4 segments, resampling segments alone has too few outcomes to
// spread. An estimate is NaN when its denominator is not positive; such
// resamples count as the largest. nil when even the 2.5th percentile is NaN.
func bootstrap(segments [][]int, estimate func(idx []int) float64) (float64, *Interval) {
	point := estimate(slices.Concat(segments...))
	if math.IsNaN(point) {
		point = 0
	}
	rng := rand.New(rand.NewPCG(1, uint64(len(segments)))) //nolint:gosec // G404: a fixed seed, so the same result gives the same report; not for security
	values := make([]float64, resamples)
	var idx []int
	for r := range values {
		idx = idx[:0]
		for range segments {
			segment := segments[rng.IntN(len(segments))]
			for range segment {
				idx = append(idx, segment[rng.IntN(len(segment))])
			}
		}
		values[r] = estimate(idx)
	}
	slices.SortFunc(values, func(x, y float64) int {
		switch {
		case math.IsNaN(x) && math.IsNaN(y):
			return 0
		case math.IsNaN(x):
			return 1
		case math.IsNaN(y):
			return -1
		}
		return cmpFloat(x, y)
	})
	low, high := values[resamples*25/1000], values[resamples*975/1000-1]
	if math.IsNaN(low) {
		return point, nil
	}
	if math.IsNaN(high) {
		return point, &Interval{Low: low, Unbounded: true}
	}
	return point, &Interval{Low: low, High: high}
}

// indices is from … to−1.
func indices(from, to int) []int {
	idx := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		idx = append(idx, i)
	}
	return idx
}

// ratio is a ÷ b, or 0 when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}
