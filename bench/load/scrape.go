package load

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gauntlet-dev/gauntlet/bench/result"
)

// Probe reads one Prometheus histogram from one process's /metrics endpoint.
// A step scrapes every probe right before and right after its measured attack;
// the difference is what the server recorded for exactly that window.
type Probe struct {
	// Source names the process in the result ("apiserver", "operator").
	Source string
	// Client reaches URL (with the API server's credentials, for instance).
	Client *http.Client
	// URL is the /metrics endpoint.
	URL string
	// Metric is the histogram's name.
	Metric string
	// GroupBy are the labels that keep series apart; series that agree on
	// them are summed (e.g. group the apiserver's histogram by webhook name,
	// summing operations and verdicts).
	GroupBy []string
}

// Snapshot is a probe's histogram at one instant, one cumulative histogram
// per GroupBy combination.
type Snapshot struct {
	probe  Probe
	groups map[string]*histogram
}

// histogram is a cumulative Prometheus histogram: counts[i] observations were
// ≤ bounds[i]; the last bound is +Inf.
type histogram struct {
	labels map[string]string
	bounds []float64
	counts []float64
	count  float64
	sum    float64
}

// Scrape reads the probe's histogram now.
func (p Probe) Scrape(ctx context.Context) (Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scraping %s metrics %s: %w", p.Source, p.URL, err)
	}
	// The text format: every server speaks it, and protobuf negotiation would
	// buy nothing for one family.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := p.Client.Do(req)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scraping %s metrics %s: %w", p.Source, p.URL, err)
	}
	defer func() { _ = resp.Body.Close() }() // read to the end or abandoned; the scrape's outcome is decided
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Snapshot{}, fmt.Errorf("scraping %s metrics %s: HTTP %d: %s", p.Source, p.URL, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	snap, err := p.parse(resp.Body)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scraping %s metrics %s: %w", p.Source, p.URL, err)
	}
	return snap, nil
}

// parse reads the text exposition format and keeps p.Metric. A family that is
// absent is an empty snapshot, not an error: a histogram vector has no series
// until its first observation.
func (p Probe) parse(r io.Reader) (Snapshot, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{probe: p, groups: map[string]*histogram{}}
	fam, ok := families[p.Metric]
	if !ok {
		return snap, nil
	}
	if fam.GetType() != dto.MetricType_HISTOGRAM {
		return Snapshot{}, fmt.Errorf("metric %s is a %s, not a histogram", p.Metric, fam.GetType())
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		key, selected := groupKey(labels, p.GroupBy)
		h := snap.groups[key]
		if h == nil {
			h = &histogram{labels: selected}
			snap.groups[key] = h
		}
		if err := h.add(m.GetHistogram()); err != nil {
			return Snapshot{}, fmt.Errorf("metric %s%v: %w", p.Metric, labels, err)
		}
	}
	return snap, nil
}

func groupKey(labels map[string]string, by []string) (string, map[string]string) {
	selected := make(map[string]string, len(by))
	parts := make([]string, 0, len(by))
	for _, name := range by {
		selected[name] = labels[name]
		parts = append(parts, name+"="+labels[name])
	}
	return strings.Join(parts, ","), selected
}

// add sums one series into h. Series of one metric share their buckets; a
// series with other bounds would make the sum meaningless, so it is refused.
func (h *histogram) add(s *dto.Histogram) error {
	bounds := make([]float64, 0, len(s.GetBucket())+1)
	counts := make([]float64, 0, len(s.GetBucket())+1)
	for _, b := range s.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
		counts = append(counts, float64(b.GetCumulativeCount()))
	}
	if len(bounds) == 0 || !math.IsInf(bounds[len(bounds)-1], 1) {
		bounds = append(bounds, math.Inf(1))
		counts = append(counts, float64(s.GetSampleCount()))
	}
	if h.bounds == nil {
		h.bounds, h.counts = bounds, counts
	} else {
		if !slices.Equal(h.bounds, bounds) {
			return fmt.Errorf("series have different buckets (%v vs %v)", h.bounds, bounds)
		}
		for i := range counts {
			h.counts[i] += counts[i]
		}
	}
	h.count += float64(s.GetSampleCount())
	h.sum += s.GetSampleSum()
	return nil
}

// Since returns what was observed between before and s, one entry per group
// with at least one observation, sorted by labels. A group absent from before
// started at zero.
func (s Snapshot) Since(before Snapshot) []result.ServerHistogram {
	return s.probe.summarize(s.deltas(before))
}

// SinceParts sums what the probes observed over the parts of a step measured
// in pieces: part i was scraped before[i] and after[i], one Snapshot per probe,
// the probes in the same order in every part. One entry per probe and group,
// as Since gives.
func SinceParts(before, after [][]Snapshot) []result.ServerHistogram {
	if len(after) == 0 {
		return nil
	}
	var out []result.ServerHistogram
	for probe := range after[0] {
		sum := map[string]*histogram{}
		for i := range after {
			for key, d := range after[i][probe].deltas(before[i][probe]) {
				if acc, ok := sum[key]; !ok {
					sum[key] = d
				} else if slices.Equal(acc.bounds, d.bounds) {
					sum[key] = acc.plus(d)
				}
			}
		}
		out = append(out, after[0][probe].probe.summarize(sum)...)
	}
	return out
}

// deltas are the groups' observations between before and s.
func (s Snapshot) deltas(before Snapshot) map[string]*histogram {
	out := make(map[string]*histogram, len(s.groups))
	for key, after := range s.groups {
		d := after
		if b, ok := before.groups[key]; ok && slices.Equal(b.bounds, after.bounds) {
			d = after.minus(b)
		}
		out[key] = d
	}
	return out
}

// summarize turns the groups' observations into the result's histograms, one
// per group with at least one observation, sorted by labels.
func (p Probe) summarize(groups map[string]*histogram) []result.ServerHistogram {
	var out []result.ServerHistogram
	for _, d := range groups {
		if d.count <= 0 {
			continue
		}
		out = append(out, result.ServerHistogram{
			Source: p.Source,
			Metric: p.Metric,
			Labels: d.labels,
			Count:  uint64(math.Round(d.count)),
			MeanMs: d.sum / d.count * 1000,
			P50Ms:  d.quantile(0.50) * 1000,
			P90Ms:  d.quantile(0.90) * 1000,
			P99Ms:  d.quantile(0.99) * 1000,
		})
	}
	slices.SortFunc(out, func(a, b result.ServerHistogram) int {
		return strings.Compare(fmt.Sprint(a.Labels), fmt.Sprint(b.Labels))
	})
	return out
}

// plus is the sum of two histograms with the same bounds.
func (h *histogram) plus(b *histogram) *histogram {
	d := &histogram{labels: h.labels, bounds: h.bounds, counts: make([]float64, len(h.counts))}
	for i := range h.counts {
		d.counts[i] = h.counts[i] + b.counts[i]
	}
	d.count = h.count + b.count
	d.sum = h.sum + b.sum
	return d
}

func (h *histogram) minus(b *histogram) *histogram {
	d := &histogram{labels: h.labels, bounds: h.bounds, counts: make([]float64, len(h.counts))}
	for i := range h.counts {
		d.counts[i] = h.counts[i] - b.counts[i]
	}
	d.count = h.count - b.count
	d.sum = h.sum - b.sum
	return d
}

// quantile estimates the q-quantile in seconds the way PromQL's
// histogram_quantile does: find the bucket holding rank q·count and
// interpolate linearly inside it, the first bucket starting at 0. A rank in
// the +Inf bucket returns the highest finite bound (the estimate cannot be
// finer than "above the last bucket").
func (h *histogram) quantile(q float64) float64 {
	n := len(h.counts)
	if n == 0 || h.counts[n-1] <= 0 {
		return math.NaN()
	}
	rank := q * h.counts[n-1]
	// Cumulative counts never decrease, so the first bucket reaching the rank
	// is a binary search away.
	i, _ := slices.BinarySearch(h.counts, rank)
	if math.IsInf(h.bounds[i], 1) {
		if n >= 2 {
			return h.bounds[n-2]
		}
		return math.NaN()
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.bounds[i-1], h.counts[i-1]
	}
	inBucket := h.counts[i] - below
	if inBucket <= 0 {
		return h.bounds[i]
	}
	return lower + (h.bounds[i]-lower)*(rank-below)/inBucket
}
