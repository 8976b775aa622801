package result

import (
	"slices"
	"time"
)

// DefaultWindows is how many windows a measured attack is cut into: a second
// each at the default 10 s per step. Ten against ten lets a rank test find a
// shift even when a stall put a window of each run on the wrong side (five
// against five cannot: p = 0.09); the price is that at 50 req/s a window's
// p99 is its slowest request.
const DefaultWindows = 10

// Window is one of the equal time slices of a measured attack, by when its
// requests were sent. A stall of the machine lands in one or two windows; a
// slower webhook shows in every one. Compare judges steps by their windows for
// that reason.
type Window struct {
	// StartSeconds is the window's start, relative to the attack's first request.
	StartSeconds float64 `json:"startSeconds"`
	// Requests is the number of requests sent in the window.
	Requests int `json:"requests"`
	// P50Ms and P99Ms are exact (nearest-rank) percentiles of the window's
	// latencies, in milliseconds.
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
}

// WindowRecorder cuts an attack's latencies into windows as they arrive.
type WindowRecorder struct {
	start, end time.Time
	n          int
	latencies  [][]time.Duration
}

// NewWindowRecorder records n windows spanning [start, start+d).
func NewWindowRecorder(start time.Time, d time.Duration, n int) *WindowRecorder {
	return &WindowRecorder{start: start, end: start.Add(d), n: n, latencies: make([][]time.Duration, n)}
}

// Add records the latency of a request sent at sent. Requests sent outside
// the span count in the nearest window.
func (w *WindowRecorder) Add(sent time.Time, latency time.Duration) {
	i := int(float64(w.n) * float64(sent.Sub(w.start)) / float64(w.end.Sub(w.start)))
	i = max(0, min(w.n-1, i))
	w.latencies[i] = append(w.latencies[i], latency)
}

// Windows returns the windows that received requests, in time order.
func (w *WindowRecorder) Windows() []Window {
	width := w.end.Sub(w.start).Seconds() / float64(w.n)
	var out []Window
	for i, l := range w.latencies {
		if len(l) == 0 {
			continue
		}
		slices.Sort(l)
		out = append(out, Window{
			StartSeconds: float64(i) * width,
			Requests:     len(l),
			P50Ms:        ms(nearestRank(l, 0.50)),
			P99Ms:        ms(nearestRank(l, 0.99)),
		})
	}
	return out
}

// nearestRank is the q-quantile of sorted: the smallest value with at least
// q of the values at or below it.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	rank := int(q*float64(len(sorted)) + 0.999999999)
	return sorted[max(0, min(len(sorted), rank)-1)]
}

// WindowP99s are the step's per-window p99s, the samples Compare ranks; a
// step without windows is one sample of its overall p99.
func (s Step) WindowP99s() []float64 {
	return s.windowValues(func(w Window) float64 { return w.P99Ms }, s.P99Ms)
}

// WindowP50s are the same for the median.
func (s Step) WindowP50s() []float64 {
	return s.windowValues(func(w Window) float64 { return w.P50Ms }, s.P50Ms)
}

func (s Step) windowValues(of func(Window) float64, overall float64) []float64 {
	if len(s.Windows) == 0 {
		return []float64{overall}
	}
	out := make([]float64, len(s.Windows))
	for i, w := range s.Windows {
		out[i] = of(w)
	}
	return out
}

// median of values (not modified).
func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	v := slices.Clone(values)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
