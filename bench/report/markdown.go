// Package report turns a benchmark result into what people read: report.md
// (machine, revision, a table of every step, the admission overhead, the
// comparison with a baseline) and two self-contained SVG plots, latency
// percentiles vs. rate and the latency distribution.
package report

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gauntlet-dev/gauntlet/bench/result"
	scenarioreport "github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
)

// File names WriteFiles creates in a run directory.
const (
	ReportFile        = "report.md"
	LatencyVsRateFile = "latency-vs-rate.svg"
	DistributionFile  = "latency-distribution.svg"
)

// Options adds optional sections to the Markdown report.
type Options struct {
	// Comparison, when set, adds the baseline comparison section.
	Comparison *result.Comparison
	// P99TargetMs maps a ladder name to its p99 target; the report then states
	// the highest rate that met it (see result.Ladder.MaxRateUnder).
	P99TargetMs map[string]float64
	// OverheadP99TargetMs, when positive, is the target for the admission
	// overhead's p99; the overhead table then says which rates met it.
	OverheadP99TargetMs float64
	// Plots are image paths, relative to the report, embedded at the end.
	Plots []string
	// Floors, when its ladders are set and measured, add the sections
	// relating the webhook ladder's admission overhead to the floors'
	// (result.FloorRatios), headed by the ratios against their goal.
	Floors Floors
}

// Markdown writes the human report of r.
func Markdown(w io.Writer, r result.Result, opts Options) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Webhook latency benchmark — %s\n\n", scenarioreport.MarkdownCell(r.Run))
	b.WriteString("| | |\n|---|---|\n")
	if r.Target != "" {
		fmt.Fprintf(&b, "| Target | %s |\n", scenarioreport.MarkdownCell(r.Target))
	}
	fmt.Fprintf(&b, "| Revision | `%s` |\n", orDash(r.GitRevision))
	k := orDash(r.KubernetesVersion)
	if r.Provider != "" {
		k += " (" + scenarioreport.MarkdownCell(r.Provider) + " provider)"
	}
	fmt.Fprintf(&b, "| Kubernetes | %s |\n", k)
	fmt.Fprintf(&b, "| Machine | %s |\n", scenarioreport.MarkdownCell(r.Machine.String()))
	if !r.StartedAt.IsZero() {
		fmt.Fprintf(&b, "| Started | %s |\n", r.StartedAt.UTC().Format(time.DateTime+" MST"))
	}
	if l := r.LoadAverage; l != nil {
		fmt.Fprintf(&b, "| Load average (1 min) | %.2f at the start, %.2f at the end, on %d cores |\n", l.Start, l.End, r.Machine.Cores)
	}
	if len(r.Settings) > 0 {
		keys := slices.Sorted(maps.Keys(r.Settings))
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%s", k, r.Settings[k]))
		}
		fmt.Fprintf(&b, "| Settings | %s |\n", scenarioreport.MarkdownCell(strings.Join(parts, ", ")))
	}
	b.WriteString("\nLatencies are in milliseconds. Absolute numbers belong to the machine above; compare runs by ratio.\n\n")

	writeFloorGoal(&b, r, opts.Floors, "")

	b.WriteString("## Steps\n\n")
	if len(r.Steps) == 0 {
		b.WriteString("No steps were measured.\n\n")
	} else {
		b.WriteString("| Step | Mode | Target | Rate (req/s) | Achieved (req/s) | Duration (s) | Requests | Success | Throughput (req/s) | p50 | p90 | p95 | p99 | max |\n")
		b.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, l := range r.Ladders() {
			for _, s := range l.Steps {
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %.1f | %.1f | %d | %s | %.1f | %s | %s | %s | %s | %s |\n",
					scenarioreport.MarkdownCell(s.Name), s.Mode, scenarioreport.MarkdownCell(s.Target), formatNumber(s.Rate), s.AchievedRate, s.DurationSeconds,
					s.Requests, formatRatio(s.SuccessRatio), s.Throughput,
					formatMs(s.P50Ms), formatMs(s.P90Ms), formatMs(s.P95Ms), formatMs(s.P99Ms), formatMs(s.MaxMs))
			}
		}
		b.WriteString("\n")
	}

	writeTargets(&b, r, opts.P99TargetMs)
	writeErrors(&b, r)

	if ov := r.Overheads(result.APIServer); len(ov) > 0 {
		b.WriteString("## Admission overhead through the API server\n\n")
		b.WriteString("Latency added by the webhooks: each step's percentiles minus those of its control (same operation, no webhooks) at the same rate.\n\n")
		if t := opts.OverheadP99TargetMs; t > 0 {
			fmt.Fprintf(&b, "Target: +p99 ≤ %s ms.\n\n", formatMs(t))
			b.WriteString("| Step | Control | Rate (req/s) | +p50 | +p90 | +p99 | Target |\n|---|---|--:|--:|--:|--:|---|\n")
		} else {
			b.WriteString("| Step | Control | Rate (req/s) | +p50 | +p90 | +p99 |\n|---|---|--:|--:|--:|--:|\n")
		}
		for _, o := range ov {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |", scenarioreport.MarkdownCell(o.Name), scenarioreport.MarkdownCell(o.Control), formatNumber(o.Rate),
				formatSignedMs(o.P50Ms), formatSignedMs(o.P90Ms), formatSignedMs(o.P99Ms))
			if t := opts.OverheadP99TargetMs; t > 0 {
				if o.P99Ms <= t {
					b.WriteString(" ✅ met |")
				} else {
					fmt.Fprintf(&b, " ❌ missed by %s ms |", formatMs(o.P99Ms-t))
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}

	writeFloorRatios(&b, r, opts.Floors, "", false)

	writeServerHistograms(&b, r)

	if opts.Comparison != nil {
		writeComparison(&b, *opts.Comparison)
	}

	if len(opts.Plots) > 0 {
		b.WriteString("## Plots\n\n")
		for _, p := range opts.Plots {
			fmt.Fprintf(&b, "![%s](%s)\n\n", plotAlt(p), p)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func writeTargets(b *bytes.Buffer, r result.Result, targets map[string]float64) {
	if len(targets) == 0 {
		return
	}
	var rows []string
	for _, l := range r.Ladders() {
		t, ok := targets[l.Name]
		if !ok {
			continue
		}
		verdict := "none: the lowest rate already missed it"
		if rate, ok := l.MaxRateUnder(t); ok {
			verdict = formatNumber(rate) + " req/s"
			if rate == l.Steps[len(l.Steps)-1].Rate {
				verdict += " (every rate measured; the limit is higher)"
			}
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s |\n", scenarioreport.MarkdownCell(l.Name), formatMs(t), verdict))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("## Highest rate under the p99 target\n\n")
	b.WriteString("A rate counts only if it and every lower rate kept p99 under the target with no failed request.\n\n")
	b.WriteString("| Ladder | p99 target (ms) | Highest rate |\n|---|--:|---|\n")
	for _, row := range rows {
		b.WriteString(row)
	}
	b.WriteString("\n")
}

// writeServerHistograms lists what the API server and the operator recorded
// for each step, next to what the load generator measured: the difference
// between the operator's time and the API server's is the call itself (TLS,
// network, encoding); between the API server's and vegeta's, everything else.
func writeServerHistograms(b *bytes.Buffer, r result.Result) {
	var rows []string
	for _, l := range r.Ladders() {
		for _, s := range l.Steps {
			for _, h := range s.ServerHistograms {
				rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %d | %s | %s | %s | %s |\n",
					scenarioreport.MarkdownCell(s.Name), formatNumber(s.Rate), scenarioreport.MarkdownCell(h.Source), scenarioreport.MarkdownCell(h.Metric), scenarioreport.MarkdownCell(labelString(h.Labels)),
					h.Count, formatMs(h.MeanMs), formatMs(h.P50Ms), formatMs(h.P90Ms), formatMs(h.P99Ms)))
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("## Server-side latency (Prometheus histograms)\n\n")
	b.WriteString("Observations each server recorded during the measured window (scrape after minus scrape before). ")
	b.WriteString("Quantiles are interpolated inside the servers' buckets, as PromQL's histogram_quantile does, so they are only as fine as those buckets; the mean is exact.\n\n")
	b.WriteString("| Step | Rate (req/s) | Source | Metric | Series | Count | mean | p50 | p90 | p99 |\n|---|--:|---|---|---|--:|--:|--:|--:|--:|\n")
	for _, row := range rows {
		b.WriteString(row)
	}
	b.WriteString("\n")
}

func labelString(labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

func writeErrors(b *bytes.Buffer, r result.Result) {
	var failing []result.Step
	for _, s := range r.Steps {
		if s.SuccessRatio < 1 && s.Requests > 0 {
			failing = append(failing, s)
		}
	}
	if len(failing) == 0 {
		return
	}
	b.WriteString("## Failed requests\n\n")
	for _, s := range failing {
		fmt.Fprintf(b, "- **%s @ %s req/s**: %s successful", scenarioreport.MarkdownCell(s.Name), formatNumber(s.Rate), formatRatio(s.SuccessRatio))
		if codes := statusCodes(s.StatusCodes); codes != "" {
			fmt.Fprintf(b, "; status codes %s", codes)
		}
		b.WriteString("\n")
		for _, e := range s.Errors {
			fmt.Fprintf(b, "  - `%s`\n", strings.ReplaceAll(oneLine(e), "`", "'"))
		}
	}
	b.WriteString("\n")
}

func writeComparison(b *bytes.Buffer, c result.Comparison) {
	if c.AB {
		b.WriteString("## A/B comparison: side B against side A, measured in one run\n\n")
	} else {
		b.WriteString("## Comparison with the baseline\n\n")
	}
	verdict := "PASS"
	if c.Failed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(b, "**%s** — %s. Tolerances: %s.\n\n", verdict, verdictCounts(c), tolerances(c.Tolerances))
	baseLabel, curLabel := "Baseline", "Current"
	if c.AB {
		baseLabel, curLabel = "Side A", "Side B"
	}
	fmt.Fprintf(b, "- %s: run %s, %s, %s\n", baseLabel, scenarioreport.MarkdownCell(c.BaseRun), measured(c.BaseTarget, c.BaseRevision), scenarioreport.MarkdownCell(c.BaseMachine.String()))
	fmt.Fprintf(b, "- %s: run %s, %s, %s\n", curLabel, scenarioreport.MarkdownCell(c.CurrentRun), measured(c.CurrentTarget, c.CurrentRevision), scenarioreport.MarkdownCell(c.CurrentMachine.String()))
	if differentMachines(c.BaseMachine, c.CurrentMachine) {
		b.WriteString("- ⚠️ The runs come from different machines: the ratios are compared, but a slower machine alone can exceed them.\n")
	}
	separate := slices.ContainsFunc(c.Steps, func(s result.StepComparison) bool {
		return (s.Base != nil && s.Base.Reference) || (s.Current != nil && s.Current.Reference)
	})
	if c.AB && separate {
		b.WriteString("\nEach side ran in a local cluster of its own (its own API server and etcd), both up throughout; the load went to one at a time, " +
			"every ladder in segments, taking turns with the others in rounds forward and back (for the two sides A B B A A B B A, or B A A B B A A B), judged as in one cluster. " +
			"The control and floor ladders ran on each side in its own cluster: their B/A ratio (Reason) is the two clusters' own difference, " +
			"which a verdict on the target's webhooks cannot see below. They are not judged.\n")
	} else if c.AB {
		b.WriteString("\nBoth sides served at the same time in one cluster and every ladder ran in segments, taking turns with the others in rounds forward and back " +
			"(for the two sides A B B A A B B A, or B A A B B A A B; the control and floors in the same rounds). Each p99 is the median " +
			"of the step's per-window p99s; window i of A ran beside window i of B, and a sign test over those pairs decides whether a growth is significant; " +
			"a growth counts only when it shows in at least three quarters of the step's segment pairs, so a stall of the machine that met a few of one side's segments is not a slower side. " +
			"Steps measured once for both sides (controls, floor) are not judged; steps beyond the machine's capacity are reported, not judged.\n")
	} else {
		b.WriteString("\nEach p99 is the median of the step's per-window p99s; \"Current\" is the current run on the baseline's machine: " +
			"measured ÷ machine factor, the factor being how much slower the step's control ladder answered than in the baseline.\n")
	}
	fmt.Fprintf(b, "\n| Verdict | Step | Rate (req/s) | %s p99 | %s p99 | Machine | Change | %s success | %s success | Reason |\n",
		baseLabel, curLabel, baseLabel, curLabel)
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, s := range c.Steps {
		basePct, curPct, machine, baseOK, curOK := "—", "—", "—", "—", "—"
		if s.Base != nil {
			basePct, baseOK = formatMs(s.Base.P99Ms), formatRatio(s.Base.SuccessRatio)
		}
		if s.Current != nil {
			curPct, curOK = formatMs(s.Current.P99Ms), formatRatio(s.Current.SuccessRatio)
		}
		change := "—"
		if p := s.P99; p != nil {
			basePct, curPct = formatMs(p.BaseMs), formatMs(p.CurrentMs)
			if p.Control != "" {
				machine = fmt.Sprintf("×%.2f", p.MachineFactor)
			}
			change = formatSignedMs(p.DeltaMs)
			if p.Ratio > 0 {
				change += fmt.Sprintf(" (%+.0f%%)", (p.Ratio-1)*100)
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", verdictLabel(s.Verdict), scenarioreport.MarkdownCell(s.Name),
			formatNumber(s.Rate), basePct, curPct, machine, change, baseOK, curOK, scenarioreport.MarkdownCell(s.Reason))
	}
	b.WriteString("\n")
}

// ComparisonMarkdown writes only the comparison section, for a pull-request
// comment or a CI job summary.
func ComparisonMarkdown(w io.Writer, c result.Comparison) error {
	var b bytes.Buffer
	writeComparison(&b, c)
	_, err := w.Write(b.Bytes())
	return err
}

// ComparisonText writes the comparison as aligned plain text for a terminal,
// failing steps first so they are not scrolled away.
func ComparisonText(w io.Writer, c result.Comparison) error {
	var b bytes.Buffer
	verdict := "PASS"
	if c.Failed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "bench-compare: %s — %s\n", verdict, verdictCounts(c))
	fmt.Fprintf(&b, "  tolerances: %s\n", tolerances(c.Tolerances))
	fmt.Fprintf(&b, "  baseline:   %s @ %s on %s\n", c.BaseRun, orDash(targetOr(c.BaseTarget, shortRevision(c.BaseRevision))), c.BaseMachine)
	fmt.Fprintf(&b, "  current:    %s @ %s on %s\n\n", c.CurrentRun, orDash(targetOr(c.CurrentTarget, shortRevision(c.CurrentRevision))), c.CurrentMachine)
	steps := slices.Clone(c.Steps)
	slices.SortStableFunc(steps, func(x, y result.StepComparison) int {
		return rank(x.Verdict) - rank(y.Verdict)
	})
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	// tabwriter reports a failed write at Flush, which is checked below.
	_, _ = fmt.Fprintln(tw, "VERDICT\tSTEP\tRATE\tREASON")
	for _, s := range steps {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", strings.ToUpper(string(s.Verdict)), s.Name, formatNumber(s.Rate), s.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

func rank(v result.Verdict) int {
	switch v {
	case result.Regressed:
		return 0
	case result.Missing:
		return 1
	case result.New:
		return 3
	}
	return 2
}

// WriteFiles writes report.md and both SVG plots into dir and returns their
// paths in that order.
func WriteFiles(dir string, r result.Result, opts Options) ([]string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("creating report directory %s: %w", dir, err)
	}
	opts.Plots = append(slices.Clone(opts.Plots), LatencyVsRateFile, DistributionFile)
	files := []struct {
		name   string
		render func(io.Writer) error
	}{
		{ReportFile, func(w io.Writer) error { return Markdown(w, r, opts) }},
		{LatencyVsRateFile, func(w io.Writer) error { return LatencyVsRateSVG(w, r) }},
		{DistributionFile, func(w io.Writer) error { return DistributionSVG(w, r) }},
	}
	var paths []string
	for _, f := range files {
		var b bytes.Buffer
		path := filepath.Join(dir, f.name)
		if err := f.render(&b); err != nil {
			return nil, fmt.Errorf("rendering %s: %w", path, err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func verdictCounts(c result.Comparison) string {
	var parts []string
	for _, v := range []result.Verdict{result.Regressed, result.Missing, result.Pass, result.Improved, result.Saturated, result.New} {
		if n := c.Count(v); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
	}
	if len(parts) == 0 {
		return "no steps to compare"
	}
	return strings.Join(parts, ", ")
}

func tolerances(t result.Tolerances) string {
	return fmt.Sprintf("%s; %s; a shift counts when a test over the windows gives p < %s; success ratio may drop by %s points",
		growth("p99", t.P99Ratio, t.P99FloorMs), growth("p50", t.P50Ratio, t.P50FloorMs), formatNumber(t.Alpha), formatNumber(t.SuccessDrop*100))
}

func growth(what string, ratio, floorMs float64) string {
	if math.IsInf(ratio, 1) {
		return what + " is not checked"
	}
	return fmt.Sprintf("%s may grow by %s%% when the increase exceeds %s ms", what, formatNumber(ratio*100), formatMs(floorMs))
}

func verdictLabel(v result.Verdict) string {
	switch v {
	case result.Regressed:
		return "❌ regressed"
	case result.Missing:
		return "❌ missing"
	case result.Improved:
		return "✅ improved"
	case result.New:
		return "🆕 new"
	case result.Saturated:
		return "⏸️ saturated"
	}
	return "✅ pass"
}

func differentMachines(a, b result.Machine) bool {
	return a.CPUModel != b.CPUModel || a.Cores != b.Cores || a.Arch != b.Arch
}

func plotAlt(path string) string {
	switch filepath.Base(path) {
	case LatencyVsRateFile:
		return "Latency percentiles vs. request rate"
	case DistributionFile:
		return "Latency distribution per rate"
	}
	return filepath.Base(path)
}

func statusCodes(codes map[string]int) string {
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s×%d", k, codes[k]))
	}
	return strings.Join(parts, ", ")
}

// formatMs prints milliseconds with three significant decimals below 1 ms
// (webhook latencies live there) and two above.
func formatMs(v float64) string {
	if v < 1 && v > -1 {
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func formatSignedMs(v float64) string {
	s := formatMs(v)
	if v >= 0 {
		s = "+" + s
	}
	return s
}

// formatRatio prints a success ratio as a percentage with enough digits to
// show a single failed request in ten thousand.
func formatRatio(v float64) string {
	return strconv.FormatFloat(v*100, 'f', 2, 64) + "%"
}

// targetOr is target, or revision for gauntlet's own operator.
func targetOr(target, revision string) string {
	if target != "" {
		return target
	}
	return revision
}

func shortRevision(rev string) string {
	if len(rev) >= 40 {
		return rev[:12] + rev[40:]
	}
	return rev
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return scenarioreport.MarkdownCell(s)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// measured names what a side measured: the target and its version, with the
// bench's revision, or the revision of gauntlet's operator.
func measured(target, revision string) string {
	if target != "" {
		return fmt.Sprintf("**%s** (bench revision `%s`)", scenarioreport.MarkdownCell(target), orDash(revision))
	}
	return fmt.Sprintf("revision `%s`", orDash(revision))
}

// ABMarkdown writes the report of an A/B run: the comparison of side B
// against side A, each side's overhead against the floors and the two sides'
// ratios against each other, and links to each side's own report
// (sideReports, relative paths).
func ABMarkdown(w io.Writer, c result.Comparison, a, b result.Result, floors Floors, sideReports [2]string) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Webhook latency A/B — %s\n\n", scenarioreport.MarkdownCell(strings.TrimSuffix(a.Run, "-a")))
	fmt.Fprintf(&buf, "Side A: %s; side B: %s. Kubernetes %s (%s provider), %s.\n\n", measured(a.Target, a.GitRevision), measured(b.Target, b.GitRevision),
		orDash(a.KubernetesVersion), orDash(a.Provider), scenarioreport.MarkdownCell(a.Machine.String()))
	fmt.Fprintf(&buf, "Each side's own report: [side A](%s), [side B](%s).\n\n", sideReports[0], sideReports[1])
	writeFloorGoal(&buf, a, floors, "Side A against the goal")
	writeFloorGoal(&buf, b, floors, "Side B against the goal")
	writeComparison(&buf, c)
	writeSidesRatios(&buf, a, b, floors)
	writeFloorRatios(&buf, a, floors, "Side A: ", false)
	writeFloorRatios(&buf, b, floors, "Side B: ", true)
	_, err := w.Write(buf.Bytes())
	return err
}
