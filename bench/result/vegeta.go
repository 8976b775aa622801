package result

import (
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// MaxErrors caps the distinct error messages kept per step: a broken target
// produces one message per connection (ports differ), and a result file is
// not a log.
const MaxErrors = 20

// curveQuantiles are the points of the latency distribution curve. They are
// spaced for a plot whose x axis is log(1/(1-q)), where the tail gets as much
// room as the body.
var curveQuantiles = []float64{
	0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.925, 0.95, 0.97,
	0.98, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999,
}

// FromMetrics builds a Step from the vegeta metrics of one attack. It calls
// m.Close (which vegeta allows more than once) so that rates and percentiles
// are computed. The distribution curve comes from vegeta's t-digest and stops
// at the finest quantile the sample can resolve (1/(1-q) ≤ requests), then
// ends at the observed maximum.
func FromMetrics(spec StepSpec, m *vegeta.Metrics) Step {
	m.Close()
	s := Step{
		StepSpec:        spec,
		AchievedRate:    m.Rate,
		DurationSeconds: m.Duration.Seconds(),
		Requests:        m.Requests,
		SuccessRatio:    m.Success,
		Throughput:      m.Throughput,
		MinMs:           ms(m.Latencies.Min),
		MeanMs:          ms(m.Latencies.Mean),
		P50Ms:           ms(m.Latencies.P50),
		P90Ms:           ms(m.Latencies.P90),
		P95Ms:           ms(m.Latencies.P95),
		P99Ms:           ms(m.Latencies.P99),
		MaxMs:           ms(m.Latencies.Max),
	}
	if len(m.StatusCodes) > 0 {
		s.StatusCodes = make(map[string]int, len(m.StatusCodes))
		for code, n := range m.StatusCodes {
			s.StatusCodes[code] = n
		}
	}
	if len(m.Errors) > 0 {
		s.Errors = append([]string(nil), m.Errors[:min(len(m.Errors), MaxErrors)]...)
	}
	if m.Requests > 0 {
		for _, q := range curveQuantiles {
			if q > 0 && 1/(1-q) > float64(m.Requests) {
				break
			}
			v := ms(m.Latencies.Quantile(q))
			if q == 0 {
				v = s.MinMs
			}
			s.Percentiles = append(s.Percentiles, Percentile{Quantile: q, Ms: v})
		}
		s.Percentiles = append(s.Percentiles, Percentile{Quantile: 1, Ms: s.MaxMs})
		monotone(s.Percentiles, s.MaxMs)
	}
	if h := m.Histogram; h != nil && len(h.Counts) == len(h.Buckets) {
		for i, from := range h.Buckets {
			b := Bucket{FromMs: ms(from), Count: h.Counts[i]}
			if i+1 < len(h.Buckets) {
				to := ms(h.Buckets[i+1])
				b.ToMs = &to
			}
			s.Histogram = append(s.Histogram, b)
		}
	}
	return s
}

// monotone clamps the estimated curve so it never decreases and never exceeds
// the observed maximum; t-digest interpolation can wobble by a few
// microseconds in the tail, and a curve that goes down reads as a bug.
func monotone(ps []Percentile, maxMs float64) {
	for i := range ps {
		if i > 0 && ps[i].Ms < ps[i-1].Ms {
			ps[i].Ms = ps[i-1].Ms
		}
		if ps[i].Ms > maxMs {
			ps[i].Ms = maxMs
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
