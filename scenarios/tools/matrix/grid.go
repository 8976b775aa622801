package matrix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
)

// Files a matrix run writes into its output directory.
const (
	ReportFile = "report.md"
	ResultFile = "result.json"
)

// Write writes the run's report.md (RenderMarkdown) and result.json into out.
func Write(out string, r Result) error {
	var md bytes.Buffer
	if err := RenderMarkdown(&md, r); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, ReportFile), md.Bytes(), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, ResultFile), append(js, '\n'), 0o600)
}

// Headline is the run's one-line verdict: cells by outcome and the time taken.
func (r Result) Headline() string {
	return fmt.Sprintf("%d cells: %d passed, %d failed, %d not started — %s", len(r.Cells), r.Count(Passed), r.Count(Failed), r.Count(NotStarted), duration(r.Seconds))
}

// RenderMarkdown writes the report: the headline, one row per cell (outcome, scenario counts,
// time, links to its reports and log), then the grid — one row per scenario of a suite, one
// column per Kubernetes version and provider, ✅/❌ and the scenario's time, a failure linked to
// its cell's artifacts — and every failure's message.
func RenderMarkdown(w io.Writer, r Result) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# E2E matrix\n\n**%s**, started %s.\n\n", r.Headline(), r.StartedAt.Format(time.RFC3339))
	if note := stressNote(r.Cells); note != "" {
		b.WriteString(note + "\n\n")
	}
	if r.Jobs > 1 {
		fmt.Fprintf(&b, "Up to %d cells ran at once (MATRIX_JOBS): each cell's times include the others' load.\n\n", r.Jobs)
	}

	b.WriteString("| cell | outcome | scenarios | time | reports |\n|---|---|--:|--:|---|\n")
	for _, c := range r.Cells {
		counts, links := "", ""
		if c.Summary != nil {
			n := c.Summary.Counts()
			counts = fmt.Sprintf("%d/%d", n.Passed, n.Total())
		}
		if c.Reports != "" {
			links = fmt.Sprintf("[reports](%s)", c.Reports)
		}
		if c.Log != "" {
			links = strings.TrimPrefix(links+" · ", " · ") + fmt.Sprintf("[log](%s)", c.Log)
		}
		outcome := icon(c.Outcome) + " " + string(c.Outcome)
		if c.Reason != "" && c.Outcome != Passed {
			outcome += ": " + report.MarkdownCell(c.Reason)
		}
		took := ""
		if c.Outcome != NotStarted {
			took = duration(c.Seconds)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", c.Cell, outcome, counts, took, links)
	}

	columns := columnsOf(r.Cells)
	rows := rowsOf(r.Cells)
	if len(rows) > 0 {
		b.WriteString("\n## Scenarios\n\n| suite | scenario |")
		for _, col := range columns {
			b.WriteString(" " + col + " |")
		}
		b.WriteString("\n|---|---|" + strings.Repeat("---|", len(columns)) + "\n")
		for _, row := range rows {
			fmt.Fprintf(&b, "| %s | %s — %s |", row.suite, row.id, report.MarkdownCell(row.title))
			for _, col := range columns {
				b.WriteString(" " + gridEntry(r.Cells, col, row) + " |")
			}
			b.WriteString("\n")
		}
	}

	var failures bytes.Buffer
	for _, c := range r.Cells {
		if c.Summary == nil {
			continue
		}
		for _, sc := range c.Summary.Scenarios {
			if sc.Result == report.Failed {
				fmt.Fprintf(&failures, "\n### %s — %s %s\n\n[artifacts](%s/artifacts) · [log](%s)\n\n```\n%s\n```\n", c.Cell, sc.ID, titleOf(sc), c.Reports, c.Log, strings.TrimSpace(sc.Message()))
			}
		}
	}
	if failures.Len() > 0 {
		b.WriteString("\n## Failures\n")
		b.Write(failures.Bytes())
	}
	_, err := w.Write(b.Bytes())
	return err
}

// stressNote says how contended the cells ran: "stress: 2 CPU-bound workers beside every cell",
// or for a merged grid of several levels which columns ran beside workers; "" when none did.
func stressNote(cells []CellResult) string {
	var levels []int
	for _, c := range cells {
		if !slices.Contains(levels, c.Stress) {
			levels = append(levels, c.Stress)
		}
	}
	switch {
	case len(levels) == 1 && levels[0] > 0:
		return report.StressLine(levels[0]) + " beside every cell"
	case len(levels) > 1:
		note := "stress: the columns marked (stress N) ran beside N CPU-bound workers"
		if slices.Contains(levels, 0) {
			note += ", the others beside none"
		}
		return note
	}
	return ""
}

type gridRow struct{ suite, id, title string }

// rowsOf is every scenario of every suite that reported, by suite then ID.
func rowsOf(cells []CellResult) []gridRow {
	var rows []gridRow
	for _, c := range cells {
		if c.Summary == nil {
			continue
		}
		for _, sc := range c.Summary.Scenarios {
			if !slices.ContainsFunc(rows, func(r gridRow) bool { return r.suite == c.Suite && r.id == sc.ID }) {
				rows = append(rows, gridRow{suite: c.Suite, id: sc.ID, title: titleOf(sc)})
			}
		}
	}
	slices.SortFunc(rows, func(a, b gridRow) int {
		if c := strings.Compare(a.suite, b.suite); c != 0 {
			return c
		}
		return report.CompareIDs(a.id, b.id)
	})
	return rows
}

// columnsOf is every version and provider, in the run's order.
func columnsOf(cells []CellResult) []string {
	var cols []string
	for _, c := range cells {
		if !slices.Contains(cols, c.column()) {
			cols = append(cols, c.column())
		}
	}
	return cols
}

// gridEntry is what the grid shows for row in column: the scenario's outcome and time, ⏸ for a
// cell that did not start, ❌ for one that failed without reporting the scenario, and nothing
// where the cell did not run that suite.
func gridEntry(cells []CellResult, column string, row gridRow) string {
	i := slices.IndexFunc(cells, func(c CellResult) bool { return c.column() == column && c.Suite == row.suite })
	if i < 0 {
		return ""
	}
	c := cells[i]
	switch {
	case c.Outcome == NotStarted:
		return "⏸"
	case c.Summary == nil:
		return fmt.Sprintf("[❌](%s)", c.Log)
	}
	j := slices.IndexFunc(c.Summary.Scenarios, func(sc report.Scenario) bool { return sc.ID == row.id })
	if j < 0 {
		return "—"
	}
	sc := c.Summary.Scenarios[j]
	t := duration(sc.Seconds)
	switch sc.Result {
	case report.Passed:
		return "✅ " + t
	case report.Skipped:
		return "⏭ " + t
	default:
		return fmt.Sprintf("❌ [%s](%s/artifacts)", t, c.Reports)
	}
}

// titleOf is a scenario's title without the ID most titles begin with ("H1 malformed bodies …").
func titleOf(sc report.Scenario) string { return strings.TrimPrefix(sc.Title, sc.ID+" ") }

func icon(o Outcome) string {
	switch o {
	case Passed:
		return "✅"
	case Failed:
		return "❌"
	default:
		return "⏸"
	}
}

func duration(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
