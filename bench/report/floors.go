package report

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/gauntlet-dev/gauntlet/bench/result"
	scenarioreport "github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
)

// Floors name the ladders a webhook ladder's admission overhead is related
// to (result.FloorRatios).
type Floors struct {
	// Ladder is the dry-run ladder through the benchmarked webhooks.
	Ladder string
	// Floor is the floor's ladder: webhooks that answer allowed without
	// decoding the object. Patching is the patching floor's: the same, its
	// mutating webhook returning the benchmarked one's patch ("": none).
	// Direct is the floor's called at its pod's address, bypassing the
	// Service ("": none).
	Floor, Patching, Direct string
	// Goal is the most Ladder's overhead may be as a multiple of a floor's
	// (1.3: 30 % more than the floor); 0 states no goal.
	Goal float64
}

// whose is who the webhooks of r's ladder are: "operator" (gauntlet's), or
// the target's name ("gatekeeper").
func whose(r result.Result) (short, webhooks string) {
	if r.Target == "" {
		return "operator", "the operator's webhooks"
	}
	name, _, _ := strings.Cut(r.Target, " ")
	return name, name + "'s webhooks"
}

// writeFloorGoal writes the headline: at each rate, the ladder's overhead as a
// multiple of the floor's and of the patching floor's, at p50 and p99, each
// judged against f.Goal on its interval (result.Against). title, when set,
// replaces the heading.
func writeFloorGoal(b *bytes.Buffer, r result.Result, f Floors, title string) {
	if f.Goal <= 0 || f.Ladder == "" || f.Floor == "" {
		return
	}
	plain := r.FloorRatios(f.Ladder, f.Floor)
	if len(plain) == 0 {
		return
	}
	patching := map[float64]result.FloorRatio{}
	if f.Patching != "" {
		for _, fr := range r.FloorRatios(f.Ladder, f.Patching) {
			patching[fr.Rate] = fr
		}
	}
	short, webhooks := whose(r)
	if title == "" {
		title = "Overhead against the floor: the goal"
	}
	fmt.Fprintf(b, "## %s\n\n", title)
	fmt.Fprintf(b, "The admission overhead of %s (%s, over its control) as a multiple of the floor's (%s), and of the patching floor's "+
		"(%s: its mutating webhook returns the same patch, so the API server applies one on both sides). **Goal: ≤ %s×** at p50 and p99.\n\n",
		scenarioreport.MarkdownCell(webhooks), scenarioreport.MarkdownCell(f.Ladder), scenarioreport.MarkdownCell(f.Floor),
		scenarioreport.MarkdownCell(orDash(f.Patching)), formatNumber(f.Goal))
	if result.InTurns(stepsOf(r, f.Ladder, plain[0].Rate)...) {
		b.WriteString("Each ratio is given with its 95 % interval, a bootstrap over the step's segments and their windows (the ladders ran " +
			"in turns, so window *i* of each ran in the same round), and judged on it: ✅ the whole interval is at or under the goal, ❌ all of it is above, " +
			"❔ it holds the goal (this run cannot tell), — no ratio (the floor's overhead was not positive).\n\n")
	} else {
		b.WriteString("The ladders ran one after the other, so there is no interval and the ratio alone is judged (✅ at or under the goal, " +
			"❌ above); `make bench-compare` measures them in turns and states an interval.\n\n")
	}
	fmt.Fprintf(b, "| Rate (req/s) | %[1]s ÷ floor, p50 | %[1]s ÷ floor, p99 | %[1]s ÷ patching floor, p50 | %[1]s ÷ patching floor, p99 |\n|--:|---|---|---|---|\n",
		scenarioreport.MarkdownCell(short))
	for _, fr := range plain {
		p, ok := patching[fr.Rate]
		cells := []string{goalCell(fr.P50, fr.P50Interval, f.Goal), goalCell(fr.P99, fr.P99Interval, f.Goal), "—", "—"}
		if ok {
			cells[2], cells[3] = goalCell(p.P50, p.P50Interval, f.Goal), goalCell(p.P99, p.P99Interval, f.Goal)
		}
		fmt.Fprintf(b, "| %s | %s |\n", formatNumber(fr.Rate), strings.Join(cells, " | "))
	}
	b.WriteString("\n")
}

// stepsOf are the steps of r at rate that a ratio of ladder relates: the
// ladder and its control (enough to tell whether they ran in turns).
func stepsOf(r result.Result, ladder string, rate float64) []result.Step {
	var out []result.Step
	for _, s := range r.Steps {
		if s.Rate != rate || s.Name != ladder {
			continue
		}
		out = append(out, s)
		if c, ok := r.ControlOf(s); ok {
			out = append(out, c)
		}
	}
	return out
}

// goalCell is a ratio judged against goal: "✅ 1.21× [1.05, 1.29]".
func goalCell(ratio float64, iv *result.Interval, goal float64) string {
	mark := map[result.GoalVerdict]string{result.GoalMet: "✅", result.GoalMissed: "❌", result.GoalUndecided: "❔", result.GoalUnknown: "—"}[result.Against(ratio, iv, goal)]
	if ratio == 0 {
		return mark
	}
	return mark + " " + formatTimesWithin(ratio, iv)
}

// formatTimesWithin is "1.42× [1.21, 1.60]", "1.42× [1.21, ∞)" for an
// unbounded interval, "1.42×" without one, or "—" for no ratio (0).
func formatTimesWithin(v float64, iv *result.Interval) string {
	if v == 0 {
		return "—"
	}
	s := fmt.Sprintf("%.2f×", v)
	switch {
	case iv == nil:
		return s
	case iv.Unbounded:
		return s + fmt.Sprintf(" [%.2f, ∞)", iv.Low)
	default:
		return s + fmt.Sprintf(" [%.2f, %.2f]", iv.Low, iv.High)
	}
}

// writeFloorRatios writes the ladder's admission overhead as a multiple of
// the floor's and of the patching floor's, the patching floor's as a
// multiple of the floor's (the API server's cost of applying a patch), and
// the floor's as a multiple of the floor's at its pod's address (the Service
// hop), per rate; prefix starts each heading ("Side A: "). With skipShared,
// a table relating two ladders measured once for both sides of an A/B run is
// left out: the other side's report has it.
func writeFloorRatios(b *bytes.Buffer, r result.Result, f Floors, prefix string, skipShared bool) {
	short, webhooks := whose(r)
	for _, t := range []struct {
		ladder, floor, what, title string
		// columns name the two ladders in the table's header.
		columns [2]string
	}{
		{f.Ladder, f.Floor, webhooks, short + " overhead against the floor", [2]string{short, "floor"}},
		{f.Ladder, f.Patching, webhooks, short + " overhead against the patching floor", [2]string{short, "patching floor"}},
		{f.Patching, f.Floor, "the patching floor's webhooks", "the API server's cost of a patch: the patching floor against the floor",
			[2]string{"patching floor", "floor"}},
		{f.Floor, f.Direct, "the floor's webhooks through the Service", "the Service hop: the floor through its Service against the floor at its pod's address",
			[2]string{"floor via Service", "floor at its address"}},
	} {
		if t.ladder == "" || t.floor == "" {
			continue
		}
		ratios := r.FloorRatios(t.ladder, t.floor)
		if len(ratios) == 0 || skipShared && sharedLadder(r, t.ladder) {
			continue
		}
		title := prefix + t.title
		fmt.Fprintf(b, "## %s\n\n", strings.ToUpper(title[:1])+title[1:])
		fmt.Fprintf(b, "The overhead of %s (%s) as a multiple of the overhead of %s, over the same control. 1.0× is the floor.",
			scenarioreport.MarkdownCell(t.ladder), scenarioreport.MarkdownCell(t.what), scenarioreport.MarkdownCell(t.floor))
		if t.floor == f.Direct {
			b.WriteString(" A ratio r means the Service hop (the node's proxy) is 1 − 1/r of the floor's overhead.")
		}
		b.WriteString("\n\n")
		fmt.Fprintf(b, "| Rate (req/s) | %[1]s +p50 | %[2]s +p50 | p50 ratio | %[1]s +p99 | %[2]s +p99 | p99 ratio |\n|--:|--:|--:|--:|--:|--:|--:|\n",
			scenarioreport.MarkdownCell(t.columns[0]), scenarioreport.MarkdownCell(t.columns[1]))
		for _, fr := range ratios {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", formatNumber(fr.Rate),
				formatSignedMs(fr.Overhead.P50Ms), formatSignedMs(fr.Floor.P50Ms), formatTimesWithin(fr.P50, fr.P50Interval),
				formatSignedMs(fr.Overhead.P99Ms), formatSignedMs(fr.Floor.P99Ms), formatTimesWithin(fr.P99, fr.P99Interval))
		}
		b.WriteString("\n")
	}
}

// sharedLadder reports whether every step of ladder name in r was measured
// once for both sides of an A/B run (Step.Shared).
func sharedLadder(r result.Result, name string) bool {
	found := false
	for _, s := range r.Steps {
		if s.Name == name {
			if !s.Shared {
				return false
			}
			found = true
		}
	}
	return found
}

// writeSidesRatios writes, per rate, side B's ratio of the ladder to the
// floor divided by side A's, with its interval (result.SidesRatios): an A/A
// run must find 1 inside it.
func writeSidesRatios(b *bytes.Buffer, a, bb result.Result, f Floors) {
	if f.Ladder == "" || f.Floor == "" {
		return
	}
	ratios := result.SidesRatios(a, bb, f.Ladder, f.Floor)
	if len(ratios) == 0 {
		return
	}
	b.WriteString("## Side B's ratio to the floor against side A's\n\n")
	b.WriteString("Side B's overhead ÷ the floor's, divided by side A's, with its 95 % interval (a bootstrap over both sides' segments " +
		"and their windows together). ✅ 1 lies inside: the two sides' ratios agree within their spread, as an A/A run must; ❌ it does not.\n\n")
	b.WriteString("| Rate (req/s) | p50: B ÷ A | p99: B ÷ A |\n|--:|---|---|\n")
	for _, sr := range ratios {
		fmt.Fprintf(b, "| %s | %s | %s |\n", formatNumber(sr.Rate), agreeCell(sr.P50, sr.P50Interval), agreeCell(sr.P99, sr.P99Interval))
	}
	b.WriteString("\n")
}

// agreeCell is "✅ 1.04× [0.91, 1.20]" when 1 lies in the interval.
func agreeCell(v float64, iv *result.Interval) string {
	switch {
	case v == 0 || iv == nil:
		return "—"
	case iv.Contains(1):
		return "✅ " + formatTimesWithin(v, iv)
	default:
		return "❌ " + formatTimesWithin(v, iv)
	}
}
