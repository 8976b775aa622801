package report

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/gauntlet-dev/gauntlet/bench/result"
)

// Trend renderings show how each step's latency moved across runs — the nightly's results,
// oldest first — so a regression report shows the trend, not just one comparison. Absolute
// numbers from different machines do not compare; the runs table names each run's machine.

// trendLadder is one ladder's steps across runs: steps[rate][run], nil where a run lacks it.
type trendLadder struct {
	name, title string
	rates       []float64
	steps       map[float64][]*result.Step
}

func trendLadders(runs []result.Result) []trendLadder {
	var ladders []trendLadder
	for ri, r := range runs {
		for _, l := range r.Ladders() {
			i := slices.IndexFunc(ladders, func(t trendLadder) bool { return t.name == l.Name })
			if i < 0 {
				ladders = append(ladders, trendLadder{name: l.Name, title: ladderTitle(l), steps: map[float64][]*result.Step{}})
				i = len(ladders) - 1
			}
			t := &ladders[i]
			for _, st := range l.Steps {
				if _, ok := t.steps[st.Rate]; !ok {
					t.steps[st.Rate] = make([]*result.Step, len(runs))
					t.rates = append(t.rates, st.Rate)
				}
				t.steps[st.Rate][ri] = &st
			}
		}
	}
	for i := range ladders {
		slices.Sort(ladders[i].rates)
	}
	return ladders
}

// runLabel names a run on the trend's x axis: its date and revision.
func runLabel(r result.Result) string {
	label := r.StartedAt.UTC().Format("01-02")
	if r.GitRevision != "" {
		label += " " + shortRevision(r.GitRevision)
	}
	return label
}

// TrendMarkdown writes the runs (date, revision, machine) and, per ladder, each rate's
// p50 / p99 in every run.
func TrendMarkdown(w io.Writer, runs []result.Result) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Webhook latency over time\n\n%d runs, oldest first. Latencies are p50 / p99 in ms; compare runs of one machine.\n\n", len(runs))
	b.WriteString("| run | date | revision | machine | provider | Kubernetes |\n|--:|---|---|---|---|---|\n")
	for i, r := range runs {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", i+1, r.StartedAt.UTC().Format("2006-01-02 15:04"), shortRevision(r.GitRevision), r.Machine, r.Provider, r.KubernetesVersion)
	}
	for _, l := range trendLadders(runs) {
		fmt.Fprintf(&b, "\n## %s\n\n| rate (req/s) |", l.title)
		for i := range runs {
			fmt.Fprintf(&b, " %d |", i+1)
		}
		b.WriteString("\n|--:|" + strings.Repeat("--:|", len(runs)) + "\n")
		for _, rate := range l.rates {
			fmt.Fprintf(&b, "| %s |", formatNumber(rate))
			for _, st := range l.steps[rate] {
				if st == nil {
					b.WriteString(" — |")
					continue
				}
				fmt.Fprintf(&b, " %s / %s |", formatMs(st.P50Ms), formatMs(st.P99Ms))
			}
			b.WriteString("\n")
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// TrendSVG plots, per ladder, every rate's p99 (solid) and p50 (dashed) across the runs.
func TrendSVG(w io.Writer, runs []result.Result) error {
	f := figure{title: "Webhook latency over time", subtitle: fmt.Sprintf("%d runs, oldest first; p99 solid, p50 dashed", len(runs))}
	x := axis{label: "run (date, revision)", min: 0.5, max: float64(len(runs)) + 0.5}
	// A label ("11-25 1a2b3c4d5e6f") needs about twice a number's room: label every nth run.
	every := max(1, int(math.Ceil(2*minTickSpaceX*float64(len(runs))/plotWidth())))
	for i, r := range runs {
		if i%every == 0 {
			x.ticks = append(x.ticks, tick{v: float64(i + 1), label: runLabel(r)})
		}
	}
	for _, l := range trendLadders(runs) {
		p := panel{title: l.title, x: x}
		var values []float64
		for ri, rate := range l.rates {
			color := rateColor(ri, len(l.rates))
			p99 := series{name: formatNumber(rate) + " req/s p99", color: color, markers: true}
			p50 := series{name: formatNumber(rate) + " req/s p50", color: color, dash: "5 4"}
			for run, st := range l.steps[rate] {
				if st == nil {
					continue
				}
				p99.points = append(p99.points, point{float64(run + 1), st.P99Ms})
				p50.points = append(p50.points, point{float64(run + 1), st.P50Ms})
				values = append(values, st.P99Ms, st.P50Ms)
			}
			p.series = append(p.series, p99, p50)
		}
		p.y = latencyAxis(values)
		f.panels = append(f.panels, p)
	}
	return f.render(w)
}
