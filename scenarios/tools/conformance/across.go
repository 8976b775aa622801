package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
)

// Across is the grid of several targets side by side (`make e2e-conformance TARGET="a b"`, or
// the nightly's runs merged: `make e2e-conformance-merge`): every check any of them ran × every
// target's modes that apply to it — on each provider and Kubernetes version, when they differ —
// each cell the target's own verdict. Modes a target does not apply are named below the grid with its reason; each
// target's own report, linked, has the reason behind every cell.
func Across(grids []Grid, reportOf func(i int) string) string {
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
				if note := fmt.Sprintf("- **%s, %s** ➖ %s", g.Target, m, oneLine(why)); !slices.Contains(notes, note) {
					notes = append(notes, note)
				}
				continue
			}
			columns = append(columns, column{g, m})
		}
	}
	slices.SortFunc(checks, report.CompareIDs)

	clusters := map[string]bool{}
	for _, g := range grids {
		clusters[g.Provider+" "+g.KubernetesVersion] = true
	}
	var b strings.Builder
	b.WriteString("| check |")
	for _, c := range columns {
		fmt.Fprintf(&b, " %s %s", c.g.Target, c.mode)
		if len(clusters) > 1 { // grids of several clusters: say which each column ran on
			fmt.Fprintf(&b, "<br>%s %s", c.g.Provider, c.g.KubernetesVersion)
		}
		b.WriteString(" |")
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
	b.WriteString("\n✅ pass · ⚠️ known divergence reproduced · ❌ unexpected · ❗ known divergence no longer reproduces · 🔧 broken test (it could not run) · ➖ not applicable · `·` not run\n\n")
	for i, g := range grids {
		name := g.Target
		if len(clusters) > 1 {
			name += " on " + g.Provider + " " + g.KubernetesVersion
		}
		notes = append(notes, fmt.Sprintf("- %s: [report](%s) (why each cell is what it is)", name, reportOf(i)))
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

// ReadGrids reads the grids a conformance run wrote under part, one per target:
// <part>/<target>/summary.json, each with the path of its report.md, and the summaries of the
// modes it ran (<part>/<target>/<mode>/summary.json).
func ReadGrids(part string) (grids []Grid, reports []string, ran []report.Summary, err error) {
	entries, err := os.ReadDir(part)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading the conformance run %s: %w", part, err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		file := filepath.Join(part, e.Name(), report.SummaryFile)
		raw, err := os.ReadFile(file) //nolint:gosec // G304: a run's grid, in a directory the caller names
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		var g Grid
		if err == nil {
			err = json.Unmarshal(raw, &g)
		}
		if err == nil && (g.Target == "" || g.Cells == nil) {
			err = errors.New("not a target's grid (no Target or Cells)")
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("reading %s: %w", file, err)
		}
		grids, reports = append(grids, g), append(reports, filepath.Join(part, e.Name(), "report.md"))
		for _, m := range g.Modes {
			if s, err := report.ReadSummary(filepath.Join(part, e.Name(), m, report.SummaryFile)); err == nil {
				ran = append(ran, s)
			}
		}
	}
	if len(grids) == 0 {
		return nil, nil, nil, fmt.Errorf("%s holds no target's grid (<target>/summary.json): give the -out of a `make e2e-conformance` run", part)
	}
	return grids, reports, ran, nil
}
