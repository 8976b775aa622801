package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
)

// Across is the grid of several targets side by side (`make e2e-conformance TARGET="a b"`):
// every check any of them ran × every target's modes that apply to it, each cell the target's
// own verdict. Modes a target does not apply are named below the grid with its reason; each
// target's own report, linked, has the reason behind every cell.
func Across(grids []Grid, reportOf func(target string) string) string {
	type column struct {
		g    Grid
		mode string
	}
	var columns []column
	var checks, notes []string
	titles := map[string]string{}
	for _, g := range grids {
		for _, id := range g.Checks {
			if !slices.Contains(checks, id) {
				checks, titles[id] = append(checks, id), g.Titles[id]
			}
		}
		for _, m := range g.Modes {
			if why, ok := g.modeNotApplicable(m); ok {
				notes = append(notes, fmt.Sprintf("- **%s, %s** ➖ %s", g.Target, m, oneLine(why)))
				continue
			}
			columns = append(columns, column{g, m})
		}
	}
	slices.SortFunc(checks, report.CompareIDs)

	var b strings.Builder
	b.WriteString("| check |")
	for _, c := range columns {
		fmt.Fprintf(&b, " %s %s |", c.g.Target, c.mode)
	}
	fmt.Fprintf(&b, "\n|---|%s\n", strings.Repeat("---|", len(columns)))
	for _, id := range checks {
		fmt.Fprintf(&b, "| %s %s |", id, titles[id])
		for _, c := range columns {
			v := NotRun
			if cell, ok := c.g.Cells[id][c.mode]; ok {
				v = cell.Verdict
			}
			fmt.Fprintf(&b, " %s |", v)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n✅ pass · ⚠️ known divergence reproduced · ❌ unexpected · ❗ known divergence no longer reproduces · ➖ not applicable · `·` not run\n\n")
	for _, g := range grids {
		notes = append(notes, fmt.Sprintf("- %s: [report](%s) (why each cell is what it is)", g.Target, reportOf(g.Target)))
	}
	b.WriteString(strings.Join(notes, "\n") + "\n")
	return b.String()
}

// modeNotApplicable says whether mode does not apply to the target at all (every check ➖), and why.
func (g Grid) modeNotApplicable(mode string) (string, bool) {
	if len(g.Checks) == 0 {
		return "", false
	}
	for _, id := range g.Checks {
		if g.Cells[id][mode].Verdict != NotApplicable {
			return "", false
		}
	}
	return g.Cells[g.Checks[0]][mode].Why, true
}
