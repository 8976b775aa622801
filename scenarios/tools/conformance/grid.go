// Package conformance turns the conformance suite's runs of one target, one per certificate
// mode, into the grid a user reads: every W check × every mode, each cell a pass, a known
// divergence reproduced, an unexpected result, or not applicable with the target's reason.
package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// Verdict is one cell's judgement.
type Verdict string

// The verdicts, as the report shows them.
const (
	Pass          Verdict = "✅"
	Reproduced    Verdict = "⚠️" // a known divergence, seen again
	Unexpected    Verdict = "❌"
	NoLonger      Verdict = "❗" // a known divergence that did not reproduce: the description is out of date
	Broken        Verdict = "🔧" // a test that could not run (a Chainsaw test that does not load): fix the test
	NotApplicable Verdict = "➖"
	NotRun        Verdict = "·" // left out by LABELS
)

// Cell is one check in one mode.
type Cell struct {
	Verdict Verdict
	Why     string // the failure's message, the divergence's reason, or why the mode does not apply
}

// Grid is a target's checks × certificate modes, on one provider and Kubernetes version.
type Grid struct {
	Target string
	// Provider and KubernetesVersion are the cluster's the modes ran on ("" when none wrote a
	// summary): a nightly run puts grids of several side by side.
	Provider, KubernetesVersion string
	Modes                       []string
	Checks                      []string          // IDs, in catalog order
	Titles                      map[string]string // ID → the check's title
	Cells                       map[string]map[string]Cell
}

// Modes are every certificate mode, in the report's order.
var Modes = []string{target.SelfManaged, target.CertManager, target.External}

// NewGrid judges summaries (by mode; nil for a declared mode whose suite wrote none, with logs
// naming where its output is) against t's declared modes and divergences.
func NewGrid(t *target.Target, summaries map[string]*report.Summary, logs map[string]string) Grid {
	g := Grid{Target: t.Name, Modes: Modes, Titles: map[string]string{}, Cells: map[string]map[string]Cell{}}
	for _, s := range summaries {
		if s == nil {
			continue
		}
		if g.Provider == "" {
			g.Provider, g.KubernetesVersion = s.Provider, s.KubernetesVersion
		}
		for _, sc := range s.Scenarios {
			if !slices.Contains(g.Checks, sc.ID) {
				g.Checks = append(g.Checks, sc.ID)
				g.Titles[sc.ID] = sc.Title
			}
		}
	}
	slices.SortFunc(g.Checks, report.CompareIDs)
	for _, id := range g.Checks {
		g.Cells[id] = map[string]Cell{}
		for _, mode := range Modes {
			g.Cells[id][mode] = judge(t, id, mode, summaries, logs)
		}
	}
	return g
}

func judge(t *target.Target, id, mode string, summaries map[string]*report.Summary, logs map[string]string) Cell {
	if why, ok := t.CertModes.NotApplicable[mode]; ok {
		return Cell{NotApplicable, why}
	}
	s, ran := summaries[mode]
	if !ran {
		return Cell{NotRun, "mode not run"}
	}
	if s == nil {
		return Cell{Unexpected, "the suite wrote no summary: see " + logs[mode]}
	}
	i := slices.IndexFunc(s.Scenarios, func(sc report.Scenario) bool { return sc.ID == id })
	if i < 0 {
		return Cell{NotRun, "not selected (LABELS)"}
	}
	sc := s.Scenarios[i]
	if sc.Broken() {
		return Cell{Broken, sc.Message()}
	}
	d := divergence(t, id, mode)
	switch {
	case sc.Result == report.Passed && d == nil:
		return Cell{Pass, ""}
	case sc.Result == report.Passed && d.Intermittent:
		return Cell{Pass, "declared intermittent divergence not seen this run (" + d.Why + ")"}
	case sc.Result == report.Passed:
		return Cell{NoLonger, "declared divergence no longer reproduces (" + d.Why + "): remove it from the description"}
	case sc.Result == report.Failed && d != nil:
		return Cell{Reproduced, d.Why + " (" + d.Link + ")"}
	case sc.Result == report.Failed:
		return Cell{Unexpected, sc.Message()}
	}
	return Cell{NotApplicable, sc.Message()}
}

func divergence(t *target.Target, id, mode string) *target.Divergence {
	for i, d := range t.Divergences {
		if d.Check == id && (len(d.Modes) == 0 || slices.Contains(d.Modes, mode)) {
			return &t.Divergences[i]
		}
	}
	return nil
}

// Failed says whether any cell is an unexpected result: a failure not declared, a declared
// divergence that no longer reproduces, or a broken test.
func (g Grid) Failed() bool { return len(g.Changed()) > 0 }

// Changed lists the unexpected cells — a failure the description does not declare, a declared
// divergence that no longer reproduces, or a broken test — one line each: where (target, check, mode,
// and the cluster's provider and version when known), the verdict and why.
func (g Grid) Changed() []string {
	var out []string
	for _, id := range g.Checks {
		for _, m := range g.Modes {
			c := g.Cells[id][m]
			if c.Verdict != Unexpected && c.Verdict != NoLonger && c.Verdict != Broken {
				continue
			}
			where := g.Target + " " + id + " " + m
			if g.Provider != "" {
				where += " (" + g.Provider + ", " + g.KubernetesVersion + ")"
			}
			out = append(out, fmt.Sprintf("%s: %s %s", where, c.Verdict, oneLine(c.Why)))
		}
	}
	return out
}

// Markdown is the grid as report.md shows it, with every cell's reason below it.
func (g Grid) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| check | %s |\n|---|%s\n", strings.Join(g.Modes, " | "), strings.Repeat("---|", len(g.Modes)))
	var notes []string
	for _, id := range g.Checks {
		fmt.Fprintf(&b, "| %s %s |", id, g.Titles[id])
		for _, m := range g.Modes {
			c := g.Cells[id][m]
			fmt.Fprintf(&b, " %s |", c.Verdict)
			if c.Why != "" && c.Verdict != NotApplicable {
				notes = append(notes, fmt.Sprintf("- **%s, %s** %s %s", id, m, c.Verdict, oneLine(c.Why)))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n✅ pass · ⚠️ known divergence reproduced · ❌ unexpected · ❗ known divergence no longer reproduces · 🔧 broken test (it could not run) · ➖ not applicable · `·` not run\n")
	for _, m := range g.Modes {
		if why, ok := g.modeNotApplicable(m); ok {
			notes = append(notes, fmt.Sprintf("- **%s** ➖ %s", m, why))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	return b.String()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}
