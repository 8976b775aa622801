package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// combined is the suites × scenarios matrix both renderers print: one row per
// scenario ID (natural order), one column per suite, because most catalog rows
// (A1–A11) run in every certificate-mode suite and a reader wants to see at a
// glance in which mode a scenario failed.
type combined struct {
	suites []Summary
	rows   []row
	totals Counts
	counts []Counts // per suite, same order as suites
	// seconds is the sum of the suites' wall times: the time a person waits
	// when suites run one after another; with E2E_JOBS > 1 `make e2e` prints
	// its shorter wall time before the table.
	seconds float64
}

type row struct {
	id    string
	title string
	cells []*Scenario // per suite; nil when the suite does not run this ID
}

func combine(suites []Summary) combined {
	c := combined{suites: slices.Clone(suites)}
	slices.SortStableFunc(c.suites, func(a, b Summary) int {
		if n := CompareIDs(a.Suite, b.Suite); n != 0 {
			return n
		}
		return strings.Compare(a.Provider, b.Provider)
	})
	byID := map[string]*row{}
	for si, s := range c.suites {
		s = s.normalized()
		c.suites[si] = s
		c.counts = append(c.counts, s.Counts())
		c.seconds += s.Seconds
		for i := range s.Scenarios {
			sc := &s.Scenarios[i]
			c.totals.add(sc.Result)
			r, ok := byID[sc.ID]
			if !ok {
				r = &row{id: sc.ID, cells: make([]*Scenario, len(suites))}
				byID[sc.ID] = r
			}
			if r.title == "" {
				r.title = sc.Title
			}
			r.cells[si] = sc
		}
	}
	for _, r := range byID {
		c.rows = append(c.rows, *r)
	}
	slices.SortFunc(c.rows, func(a, b row) int { return CompareIDs(a.id, b.id) })
	return c
}

// column names suite si in the scenario grid: its name, and its provider too when the table
// holds runs of more than one provider (the same suite on local and on kind).
func (c combined) column(si int) string {
	s := c.suites[si]
	for _, o := range c.suites {
		if o.Provider != s.Provider {
			return s.Suite + "/" + s.Provider
		}
	}
	return s.Suite
}

// noted lists (suite, scenario) pairs with the given outcome filter, in row
// order, for the failure and measurement sections.
func (c combined) noted(keep func(Scenario) bool) []notedScenario {
	var out []notedScenario
	for _, r := range c.rows {
		for si, sc := range r.cells {
			if sc != nil && keep(*sc) {
				out = append(out, notedScenario{suite: c.column(si), sc: *sc})
			}
		}
	}
	return out
}

type notedScenario struct {
	suite string
	sc    Scenario
}

// writeSection writes heading and then each scenario with write, or nothing when there is none.
func writeSection(b *bytes.Buffer, heading string, noted []notedScenario, write func(*bytes.Buffer, notedScenario)) {
	if len(noted) == 0 {
		return
	}
	b.WriteString(heading)
	for _, n := range noted {
		write(b, n)
	}
}

func isFailed(s Scenario) bool { return s.Result == Failed }

// hasNotes selects non-failed scenarios that reported details, such as
// C8's admission count, a failover distribution or a skip reason: things people
// look for even when nothing failed.
func hasNotes(s Scenario) bool { return s.Result != Failed && len(s.Details) > 0 }

func (c combined) headline() string {
	return fmt.Sprintf("%d scenarios: %d passed, %d failed, %d skipped — %d %s, %s",
		c.totals.Total(), c.totals.Passed, c.totals.Failed, c.totals.Skipped,
		len(c.suites), plural(len(c.suites), "suite", "suites"), formatWallTime(c.seconds))
}

// StressLine is how a report states a suite's --stress level, so a reader knows the run was
// contended: "stress: 2 CPU-bound workers".
func StressLine(workers int) string {
	return fmt.Sprintf("stress: %d CPU-bound %s", workers, plural(workers, "worker", "workers"))
}

// stressNote says which suites ran beside CPU-bound workers and how many, one level after
// another ("stress: 2 CPU-bound workers beside autocert, hostile"), or "" when none did.
func (c combined) stressNote() string {
	var levels []int
	beside := map[int][]string{}
	for i, s := range c.suites {
		if s.Stress == 0 {
			continue
		}
		if _, seen := beside[s.Stress]; !seen {
			levels = append(levels, s.Stress)
		}
		beside[s.Stress] = append(beside[s.Stress], oneLine(c.column(i)))
	}
	parts := make([]string, 0, len(levels))
	for _, n := range levels {
		parts = append(parts, StressLine(n)+" beside "+strings.Join(beside[n], ", "))
	}
	return strings.Join(parts, "; ")
}

// RenderMarkdown writes the combined table of every suite (summary.md): a
// per-suite totals table, one row per scenario ID with a column per suite,
// then every failure with its details and, under Notes, the details of
// passed and skipped scenarios (measurements, skip reasons).
func RenderMarkdown(w io.Writer, suites []Summary) error {
	c := combine(suites)
	var b bytes.Buffer
	b.WriteString("# End-to-end results\n\n")
	fmt.Fprintf(&b, "**%s**\n\n", c.headline())
	if note := c.stressNote(); note != "" {
		fmt.Fprintf(&b, "%s\n\n", mdText(note))
	}

	b.WriteString("| Suite | Provider | Kubernetes | Passed | Failed | Skipped | Time |\n")
	b.WriteString("|---|---|---|--:|--:|--:|--:|\n")
	for i, s := range c.suites {
		n := c.counts[i]
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %s |\n", MarkdownCell(s.Suite), MarkdownCell(s.Provider),
			MarkdownCell(s.KubernetesVersion), n.Passed, n.Failed, n.Skipped, formatWallTime(s.Seconds))
	}
	fmt.Fprintf(&b, "| **Total** | | | **%d** | **%d** | **%d** | **%s** |\n\n",
		c.totals.Passed, c.totals.Failed, c.totals.Skipped, formatWallTime(c.seconds))

	if len(c.rows) > 0 {
		b.WriteString("## Scenarios\n\n| ID | Title |")
		for si := range c.suites {
			fmt.Fprintf(&b, " %s |", MarkdownCell(c.column(si)))
		}
		b.WriteString("\n|---|---|" + strings.Repeat("---|", len(c.suites)) + "\n")
		for _, r := range c.rows {
			fmt.Fprintf(&b, "| %s | %s |", MarkdownCell(r.id), MarkdownCell(r.title))
			for _, sc := range r.cells {
				fmt.Fprintf(&b, " %s |", mdOutcome(sc))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}

	writeSection(&b, "## Failures\n\n", c.noted(isFailed), writeMarkdownScenario)
	writeSection(&b, "## Notes\n\n", c.noted(hasNotes), writeMarkdownScenario)
	_, err := w.Write(b.Bytes())
	return err
}

func writeMarkdownScenario(b *bytes.Buffer, n notedScenario) {
	fmt.Fprintf(b, "### %s · %s", mdText(n.sc.ID), mdText(n.suite))
	if n.sc.Title != "" {
		fmt.Fprintf(b, " — %s", mdText(n.sc.Title))
	}
	b.WriteString("\n\n")
	if msg := n.sc.Message(); msg != "" {
		writeFenced(b, msg)
	}
	for _, k := range detailKeys(n.sc.Details) {
		v := formatValue(n.sc.Details[k])
		if strings.Contains(v, "\n") {
			fmt.Fprintf(b, "- `%s`:\n\n", k)
			writeFenced(b, v)
			continue
		}
		fmt.Fprintf(b, "- `%s`: %s\n", k, mdInline(v))
	}
	b.WriteString("\n")
}

// writeFenced writes text as a code block whose fence is longer than any
// backtick run inside it, so operator logs or API errors cannot break out of
// the block.
func writeFenced(b *bytes.Buffer, text string) {
	longest, run := 0, 0
	for _, r := range text {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	fmt.Fprintf(b, "%stext\n%s\n%s\n\n", fence, strings.TrimRight(text, "\n"), fence)
}

func mdOutcome(sc *Scenario) string {
	if sc == nil {
		return "—"
	}
	t := formatScenarioTime(sc.Seconds)
	switch sc.Result {
	case Passed:
		return "✅ passed " + t
	case Failed:
		if sc.Broken() {
			return "❌ **broken test** " + t
		}
		return "❌ **failed** " + t
	default:
		return "⏭️ skipped"
	}
}

// mdCell makes text safe inside a table cell: no pipes, no line breaks.
// MarkdownCell makes s one table cell of Markdown: one line, its pipes escaped.
func MarkdownCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}

// FirstLine is s's first non-blank line, cut to at most maxLen bytes on a character boundary (an
// ellipsis marks a cut): what a one-line report quotes of a multi-line message.
func FirstLine(s string, maxLen int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) <= maxLen {
		return s
	}
	cut := max(maxLen-len("…"), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// mdText escapes the characters that would turn a heading into markup.
func mdText(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "<", "&lt;", "[", `\[`)
	return r.Replace(s)
}

// mdInline puts a value in a code span, which needs no escaping as long as the
// delimiter is longer than any backtick run inside.
func mdInline(s string) string {
	if s == "" {
		return `""`
	}
	d := "`"
	for strings.Contains(s, d) {
		d += "`"
	}
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	return d + pad + s + pad + d
}

// RenderText writes the same combined table as RenderMarkdown as plain,
// aligned text for a terminal.
func RenderText(w io.Writer, suites []Summary) error {
	c := combine(suites)
	var b bytes.Buffer
	fmt.Fprintf(&b, "E2E RESULTS  %s\n", c.headline())
	if note := c.stressNote(); note != "" {
		fmt.Fprintf(&b, "%s\n", note)
	}
	b.WriteString("\n")

	// tabwriter reports a failed write at Flush, which is checked.
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "SUITE\tPROVIDER\tKUBERNETES\tPASSED\tFAILED\tSKIPPED\tTIME")
	for i, s := range c.suites {
		n := c.counts[i]
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", oneLine(s.Suite), orDash(s.Provider), orDash(s.KubernetesVersion),
			n.Passed, n.Failed, n.Skipped, formatWallTime(s.Seconds))
	}
	_, _ = fmt.Fprintf(tw, "TOTAL\t\t\t%d\t%d\t%d\t%s\n", c.totals.Passed, c.totals.Failed, c.totals.Skipped, formatWallTime(c.seconds))
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(c.rows) > 0 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		_, _ = fmt.Fprint(tw, "ID\tTITLE")
		for si := range c.suites {
			_, _ = fmt.Fprintf(tw, "\t%s", strings.ToUpper(oneLine(c.column(si))))
		}
		_, _ = fmt.Fprintln(tw)
		for _, r := range c.rows {
			_, _ = fmt.Fprintf(tw, "%s\t%s", oneLine(r.id), truncate(oneLine(r.title), 52))
			for _, sc := range r.cells {
				_, _ = fmt.Fprintf(tw, "\t%s", textOutcome(sc))
			}
			_, _ = fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	writeSection(&b, "\nFAILURES\n", c.noted(isFailed), writeTextScenario)
	writeSection(&b, "\nNOTES\n", c.noted(hasNotes), writeTextScenario)
	_, err := w.Write(b.Bytes())
	return err
}

func writeTextScenario(b *bytes.Buffer, n notedScenario) {
	fmt.Fprintf(b, "  %s [%s] %s\n", n.sc.ID, n.suite, oneLine(n.sc.Title))
	for _, line := range strings.Split(strings.TrimRight(detailLines(n.sc.Details), "\n"), "\n") {
		if line != "" {
			fmt.Fprintf(b, "      %s\n", line)
		}
	}
}

func textOutcome(sc *Scenario) string {
	if sc == nil {
		return "-"
	}
	t := formatScenarioTime(sc.Seconds)
	switch sc.Result {
	case Passed:
		return "passed " + t
	case Failed:
		if sc.Broken() {
			return "BROKEN TEST " + t
		}
		return "FAILED " + t
	default:
		return "skipped"
	}
}

// WriteMarkdownFile renders suites into path (normally _output/e2e/summary.md).
func WriteMarkdownFile(path string, suites []Summary) error {
	var b bytes.Buffer
	if err := RenderMarkdown(&b, suites); err != nil {
		return fmt.Errorf("rendering %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("creating directory for %s: %w", path, err)
	}
	return writeFileAtomic(path, b.Bytes())
}

// detailLines renders details for people: the message first, then one
// "key: value" line per other detail in key order; multi-line values are
// indented under their key.
func detailLines(d map[string]any) string {
	var b strings.Builder
	if m, ok := d[MessageKey].(string); ok && m != "" {
		b.WriteString(strings.TrimRight(m, "\n"))
		b.WriteString("\n")
	}
	for _, k := range detailKeys(d) {
		v := formatValue(d[k])
		if strings.Contains(v, "\n") {
			fmt.Fprintf(&b, "%s:\n", k)
			for _, line := range strings.Split(strings.TrimRight(v, "\n"), "\n") {
				fmt.Fprintf(&b, "  %s\n", line)
			}
			continue
		}
		fmt.Fprintf(&b, "%s: %s\n", k, v)
	}
	return b.String()
}

// detailKeys returns the detail keys in order, leaving out a string message
// (printed separately).
func detailKeys(d map[string]any) []string {
	keys := make([]string, 0, len(d))
	for k, v := range d {
		if _, isString := v.(string); k == MessageKey && isString {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// formatValue prints a detail the way it reads best: strings verbatim, numbers
// without exponent or trailing zeros, durations as Go durations, anything else
// as compact JSON (objects with sorted keys, so output is stable).
func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32)
	case time.Duration:
		return x.String()
	case fmt.Stringer:
		return x.String()
	}
	js, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(js)
}

func formatScenarioTime(s float64) string {
	if s < 60 {
		return strconv.FormatFloat(s, 'f', 1, 64) + "s"
	}
	return formatWallTime(s)
}

func formatWallTime(s float64) string {
	if s < 60 {
		return strconv.FormatFloat(s, 'f', 1, 64) + "s"
	}
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return oneLine(s)
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
