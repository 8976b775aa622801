package suiterun

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// EventKind is what changed in the run.
type EventKind int

const (
	// SuiteStarted: Suite's go test started.
	SuiteStarted EventKind = iota + 1
	// ScenarioEnded: Scenario of Suite ended.
	ScenarioEnded
	// SuiteEnded: Suite's go test exited, or (NotStarted) its turn never came.
	SuiteEnded
	// Changed: a suite started a scenario or a step, or a second passed.
	Changed
	// Message: Text is for the person running the suites (an interrupt, say).
	Message
	// RunEnded: every suite ended; nothing is shown after it.
	RunEnded
)

// Event is one change of the run; Suite indexes Frame.Suites.
type Event struct {
	Kind     EventKind
	Suite    int
	Scenario suite.ProgressEvent
	Text     string
}

// Frame is the run as an event left it.
type Frame struct {
	Suites     []SuiteState
	Start, Now time.Time
}

// Display shows the run as it goes; the run calls Show from one goroutine at a time.
type Display interface {
	Show(ev Event, f Frame)
}

// Plain prints one line per suite start and end, per scenario end and per message: for logs,
// where a line once written stays (CI), so no line is ever redrawn.
type Plain struct{ W io.Writer }

// Show implements Display.
func (p Plain) Show(ev Event, f Frame) {
	if line := permanentLine(ev, f); line != "" {
		_, _ = fmt.Fprintln(p.W, line) // progress is best effort
	}
}

// permanentLine is the line an event leaves in the output, "" for events that leave none.
func permanentLine(ev Event, f Frame) string {
	at := "[" + fmt.Sprintf("%7s", f.Now.Sub(f.Start).Round(time.Second)) + "] "
	switch ev.Kind {
	case SuiteStarted:
		s := f.Suites[ev.Suite]
		return fmt.Sprintf("%s▶ %s started (%d of %d running); log: %s", at, s.Name, count(f, Running), len(f.Suites), DisplayPath(s.Log))
	case ScenarioEnded:
		s, sc := f.Suites[ev.Suite], ev.Scenario
		return fmt.Sprintf("%s  %s: %s %s in %.1fs (%s so far)", at, s.Name, sc.ID, outcomeWord(sc.Result), sc.Seconds, counts(s))
	case SuiteEnded:
		return at + suiteEndLine(f.Suites[ev.Suite], f.Now)
	case Message:
		return at + ev.Text
	default:
		return ""
	}
}

func outcomeWord(o report.Outcome) string {
	if o == report.Failed {
		return "FAILED"
	}
	return string(o)
}

// suiteEndLine says how a suite ended.
func suiteEndLine(s SuiteState, now time.Time) string {
	switch {
	case s.Status == NotStarted:
		return fmt.Sprintf("- %s not started: the run was interrupted first", s.Name)
	case s.OK():
		return fmt.Sprintf("✓ %s passed in %s: %s", s.Name, s.Elapsed(now).Round(time.Second), counts(s))
	case s.Summary == nil:
		return fmt.Sprintf("✗ %s failed in %s: go test %s without a %s", s.Name, s.Elapsed(now).Round(time.Second), exitWords(s.Exit), report.SummaryFile)
	case s.Exit != nil && s.Failed == 0:
		return fmt.Sprintf("✗ %s failed in %s: %s, but go test %s", s.Name, s.Elapsed(now).Round(time.Second), counts(s), exitWords(s.Exit))
	default:
		return fmt.Sprintf("✗ %s failed in %s: %s", s.Name, s.Elapsed(now).Round(time.Second), counts(s))
	}
}

func exitWords(err error) string {
	if err == nil {
		return "exited 0"
	}
	return "ended (" + err.Error() + ")"
}

func counts(s SuiteState) string {
	out := fmt.Sprintf("%d passed, %d failed", s.Passed, s.Failed)
	if s.Skipped > 0 {
		out += fmt.Sprintf(", %d skipped", s.Skipped)
	}
	return out
}

func count(f Frame, st Status) int {
	n := 0
	for _, s := range f.Suites {
		if s.Status == st {
			n++
		}
	}
	return n
}

// Live keeps one line per running suite at the bottom of a terminal, redrawn on every change
// and every second, under the lines Plain would print.
type Live struct {
	W io.Writer
	// Width is the terminal's width in columns: longer lines are cut, as a wrapped line would
	// throw off the redraw.
	Width int

	drawn int // lines of the last frame, to move up over
}

// ANSI control sequences: to the start of the line n lines up, and erase to the screen's end.
const (
	cursorUpFormat = "\x1b[%dF"
	eraseDown      = "\x1b[J"
)

// Show implements Display.
func (l *Live) Show(ev Event, f Frame) {
	var b strings.Builder
	if l.drawn > 0 {
		fmt.Fprintf(&b, cursorUpFormat, l.drawn)
	}
	b.WriteString(eraseDown)
	if line := permanentLine(ev, f); line != "" {
		b.WriteString(line + "\n")
	}
	l.drawn = 0
	if ev.Kind != RunEnded {
		for _, line := range l.frame(f) {
			b.WriteString(cut(line, l.Width-1) + "\n")
			l.drawn++
		}
	}
	_, _ = io.WriteString(l.W, b.String()) // progress is best effort
}

// frame is the live part: a headline, then each running suite's name, time, counts and
// activity.
func (l *Live) frame(f Frame) []string {
	head := fmt.Sprintf("e2e: %d running, %d waiting, %d ended", count(f, Running), count(f, Waiting), count(f, Ended))
	if failed := countFailed(f); failed > 0 {
		head += fmt.Sprintf(" (%d failed)", failed)
	}
	lines := []string{head + " · " + f.Now.Sub(f.Start).Round(time.Second).String()}
	width := 0
	for _, s := range f.Suites {
		width = max(width, len(s.Name))
	}
	for _, s := range f.Suites {
		if s.Status != Running {
			continue
		}
		lines = append(lines, fmt.Sprintf("  %-*s %7s  %3d passed %2d failed  %s",
			width, s.Name, s.Elapsed(f.Now).Round(time.Second), s.Passed, s.Failed, s.Activity))
	}
	return lines
}

func countFailed(f Frame) int {
	n := 0
	for _, s := range f.Suites {
		if s.Status == Ended && !s.OK() {
			n++
		}
	}
	return n
}

// cut shortens s to at most n characters, ending it with … when it was longer.
func cut(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
