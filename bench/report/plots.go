package report

import (
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/gauntlet-dev/gauntlet/bench/result"
)

// percentileSeries are the lines of the latency-vs-rate plot, colored from
// cool (typical request) to warm (tail); max is dashed because it is a single
// request and jumps around.
var percentileSeries = []struct {
	name  string
	color string
	dash  string
	value func(result.Step) float64
}{
	{"p50", "#1f77b4", "", func(s result.Step) float64 { return s.P50Ms }},
	{"p90", "#2ca02c", "", func(s result.Step) float64 { return s.P90Ms }},
	{"p95", "#ff7f0e", "", func(s result.Step) float64 { return s.P95Ms }},
	{"p99", "#d62728", "", func(s result.Step) float64 { return s.P99Ms }},
	{"max", "#7f7f7f", "6 4", func(s result.Step) float64 { return s.MaxMs }},
}

// rateColors runs from light to dark (viridis anchors, reversed) so that a
// higher rate reads as "more load" at a glance.
var rateColors = [][3]float64{{0x7a, 0xd1, 0x51}, {0x22, 0xa8, 0x84}, {0x2a, 0x78, 0x8e}, {0x41, 0x44, 0x87}, {0x44, 0x01, 0x54}}

func plotWidth() float64  { return float64(figureWidth - 2*figureMargin - plotLeft - plotRight) }
func plotHeight() float64 { return float64(panelHeight - plotTop - plotBottom) }

// LatencyVsRateSVG plots, for each ladder, latency percentiles (p50, p90,
// p95, p99, max) against the requested rate: the curve that shows where the
// webhook stops keeping up.
func LatencyVsRateSVG(w io.Writer, r result.Result) error {
	f := figure{
		title:    "Webhook latency vs. request rate",
		subtitle: subtitle(r),
	}
	for _, l := range r.Ladders() {
		var rates, values []float64
		for _, s := range l.Steps {
			rates = append(rates, s.Rate)
			for _, ps := range percentileSeries {
				values = append(values, ps.value(s))
			}
		}
		p := panel{title: ladderTitle(l)}
		p.x = rateAxis(rates)
		p.y = latencyAxis(values)
		for _, ps := range percentileSeries {
			s := series{name: ps.name, color: ps.color, dash: ps.dash, markers: true}
			for _, st := range l.Steps {
				s.points = append(s.points, point{st.Rate, ps.value(st)})
			}
			p.series = append(p.series, s)
		}
		f.panels = append(f.panels, p)
	}
	return f.render(w)
}

// DistributionSVG plots, for each ladder, the latency distribution curve of
// every rate: latency against percentile on a log scale of 1/(1−q), which
// spreads the tail (99 %, 99.9 %, …) as widely as the body.
func DistributionSVG(w io.Writer, r result.Result) error {
	f := figure{
		title:    "Webhook latency distribution",
		subtitle: subtitle(r),
	}
	for _, l := range r.Ladders() {
		p := panel{title: ladderTitle(l)}
		var values []float64
		maxX := 10.0
		for i, st := range l.Steps {
			s := series{
				name:  fmt.Sprintf("%s req/s (max %s ms)", formatNumber(st.Rate), formatMs(st.MaxMs)),
				color: rateColor(i, len(l.Steps)),
			}
			for _, pc := range st.Percentiles {
				if pc.Quantile >= 1 {
					continue // the maximum sits at infinity on this axis; the legend names it
				}
				if pc.Quantile == 0 {
					// The single fastest request would stretch a log axis by a
					// decade or two and squash the body of the distribution.
					continue
				}
				x := 1 / (1 - pc.Quantile)
				s.points = append(s.points, point{x, pc.Ms})
				values = append(values, pc.Ms)
				maxX = math.Max(maxX, x)
			}
			if len(s.points) > 0 {
				p.series = append(p.series, s)
			}
		}
		if len(p.series) == 0 {
			p.note = "no latency distribution recorded for this ladder"
			f.panels = append(f.panels, p)
			continue
		}
		p.x = percentileAxis(maxX)
		p.y = latencyAxis(values)
		f.panels = append(f.panels, p)
	}
	return f.render(w)
}

func subtitle(r result.Result) string {
	s := "run " + r.Run
	if r.GitRevision != "" {
		s += " · revision " + shortRevision(r.GitRevision)
	}
	if r.KubernetesVersion != "" {
		s += " · Kubernetes " + r.KubernetesVersion
	}
	if m := r.Machine; m.Cores > 0 {
		s += " · " + m.CPUModel + fmt.Sprintf(", %d cores", m.Cores)
	}
	return s
}

func ladderTitle(l result.Ladder) string {
	t := l.Name + " (" + string(l.Mode)
	if l.Target != "" {
		t += ": " + l.Target
	}
	return t + ")"
}

// rateAxis is logarithmic for geometric ladders (100 → 2,000 spans more than
// a decade and the low rates would otherwise crowd into one corner) and
// linear otherwise; either way the ticks are the measured rates.
func rateAxis(rates []float64) axis {
	rates = slices.Clone(rates)
	slices.Sort(rates)
	rates = slices.Compact(rates)
	lo, hi := rates[0], rates[len(rates)-1]
	const label = "requested rate (req/s)"
	var a axis
	if lo > 0 && hi/lo >= 8 {
		a = axis{label: label, log: true, min: lo / 1.25, max: hi * 1.25}
	} else {
		pad := (hi - lo) * 0.08
		if pad == 0 {
			pad = math.Max(hi*0.25, 1)
		}
		a = axis{label: label, min: math.Max(0, lo-pad), max: hi + pad}
	}
	return valueTicks(a, rates, plotWidth(), minTickSpaceX)
}

// latencyAxis is logarithmic when the values span more than a factor of 20
// (a max of 40 ms would otherwise flatten p50 = 0.4 ms onto the axis) and
// linear from zero otherwise.
func latencyAxis(values []float64) axis {
	lo, hi := math.Inf(1), 0.0
	for _, v := range values {
		if v > 0 {
			lo = math.Min(lo, v)
		}
		hi = math.Max(hi, v)
	}
	const label = "latency (ms)"
	if hi <= 0 {
		return linearAxis(label, 0, 1, plotHeight(), minTickSpaceY)
	}
	if hi/lo > 20 {
		return logAxis(label, lo, hi, plotHeight(), minTickSpaceY)
	}
	return linearAxis(label, 0, hi, plotHeight(), minTickSpaceY)
}

// percentileAxis maps quantile q to 1/(1−q): 0 % → 1, 90 % → 10,
// 99 % → 100, and labels the ticks as percentiles.
func percentileAxis(maxX float64) axis {
	// A little room past the last point, not a whole decade of empty plot.
	a := axis{label: "percentile", log: true, min: 1, max: maxX * 1.3}
	labels := map[float64]string{1: "0%", 2: "50%", 10: "90%", 100: "99%", 1e3: "99.9%", 1e4: "99.99%", 1e5: "99.999%", 1e6: "99.9999%"}
	for _, v := range []float64{1, 2, 10, 100, 1e3, 1e4, 1e5, 1e6} {
		if v <= a.max {
			a.ticks = append(a.ticks, tick{v: v, label: labels[v]})
		}
	}
	return a
}

// rateColor interpolates the palette so any number of rates gets distinct,
// ordered colors.
func rateColor(i, n int) string {
	if n <= 1 {
		n, i = 2, 1 // a single rate gets the darkest color
	}
	pos := float64(i) / float64(n-1) * float64(len(rateColors)-1)
	k := min(int(pos), len(rateColors)-2)
	t := pos - float64(k)
	a, b := rateColors[k], rateColors[k+1]
	var c [3]int
	for j := range c {
		c[j] = int(math.Round(a[j] + t*(b[j]-a[j])))
	}
	return fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2])
}
