package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Markers of the text report.
const (
	markPass        = "✓"
	markFail        = "✗"
	markConsequence = "✗"
	markSkipped     = "–"
)

// WriteText prints one line per check — ✓, ✗ or – (skipped), the check ID and its title — and,
// under each failure, its cause, fix and details; then a summary line.
func (r Report) WriteText(w io.Writer) error {
	width := 0
	for _, res := range r {
		width = max(width, len(res.ID))
	}
	var b strings.Builder
	for _, res := range r {
		switch res.Status {
		case StatusPass:
			fmt.Fprintf(&b, "%s %-*s  %s\n", markPass, width, res.ID, res.Title)
		case StatusSkipped:
			fmt.Fprintf(&b, "%s %-*s  %s (%s)\n", markSkipped, width, res.ID, res.Title, res.Cause)
		case StatusConsequence:
			fmt.Fprintf(&b, "%s %-*s  %s (consequence of %s)\n", markConsequence, width, res.ID, res.Title, strings.Join(res.DependsOn, ", "))
			writeBlock(&b, "cause", res.Cause)
			writeDetails(&b, res.Details)
		case StatusFail:
			fmt.Fprintf(&b, "%s %-*s  %s\n", markFail, width, res.ID, res.Title)
			writeBlock(&b, "cause", res.Cause)
			writeBlock(&b, "fix", res.Fix)
			writeDetails(&b, res.Details)
		}
	}
	b.WriteString(r.summary())
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeBlock(b *strings.Builder, label, text string) {
	if text == "" {
		return
	}
	for i, line := range strings.Split(text, "\n") {
		if i == 0 {
			fmt.Fprintf(b, "    %-6s %s\n", label+":", line)
		} else {
			fmt.Fprintf(b, "           %s\n", line)
		}
	}
}

func writeDetails(b *strings.Builder, details []string) {
	for _, d := range details {
		fmt.Fprintf(b, "      · %s\n", d)
	}
}

// summary is the last line of the text report.
func (r Report) summary() string {
	if r.Healthy() {
		var idle []string
		for _, res := range r {
			if res.inapplicable {
				idle = append(idle, res.ID)
			}
		}
		if len(idle) > 0 {
			return fmt.Sprintf("healthy: %d checks passed, %d had nothing to examine (%s)", len(r)-len(idle), len(idle), strings.Join(idle, ", "))
		}
		return fmt.Sprintf("healthy: all %d checks passed", len(r))
	}
	var roots []string
	consequences, skipped := 0, 0
	for _, res := range r {
		switch res.Status {
		case StatusFail:
			roots = append(roots, res.Name())
		case StatusConsequence:
			consequences++
		case StatusSkipped:
			skipped++
		}
	}
	noun := "root causes"
	if len(roots) == 1 {
		noun = "root cause"
	}
	return fmt.Sprintf("unhealthy: %d %s: %s; %d consequential failures, %d skipped", len(roots), noun, strings.Join(roots, ", "), consequences, skipped)
}

// WriteJSON prints the report as a JSON array of results.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if r == nil {
		r = Report{}
	}
	return enc.Encode(r)
}
