// Package steps prints the named steps of a long task for a person: what runs, whether it
// passed (✓) or failed (✗), and how long it took. It has two layouts, one per kind of output:
//
//   - New, kind-style, for a cluster provider's creation steps: "• Starting control plane …"
//     while a step runs (on a terminal), then " ✓ Starting control plane  1.8s" or " ✗ …";
//   - NewLog, for a log whose other lines interleave with the steps (a suite's progress):
//     "• Installing … …" when a step begins, "✓ Installing … (1.8s)" or "✗ … (1.8s): <error>"
//     when it ends, each a line of its own.
package steps

import (
	"fmt"
	"io"
	"os"
	"time"
)

// Observer is a writer that also keeps each step's span: a suite's progress, whose profile
// lists the steps a provider runs (preparing binaries, starting the control plane) among the
// suite's own. A Printer writing to one tells it when a step begins; the func it returns ends it.
type Observer interface {
	io.Writer
	BeginStep(title string) (end func())
}

// Printer prints steps to one writer.
type Printer struct {
	w   io.Writer
	tty bool
	// log selects NewLog's layout.
	log bool
}

// New returns a Printer writing to w (nil discards) in kind's layout: a line per step once it
// ended, title and duration in columns; on a terminal, the running step shows until then.
func New(w io.Writer) *Printer {
	if w == nil {
		w = io.Discard
	}
	p := &Printer{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// NewLog returns a Printer writing to w in a log's layout: a line when a step begins and a
// line, with the error of a failed step, when it ends. Each line is one Write, so that a
// writer that stamps lines (a suite's progress) sees whole lines.
func NewLog(w io.Writer) *Printer { return &Printer{w: w, log: true} }

// Step runs fn as one named step and reports its outcome and duration (and its span to a writer
// that is an Observer). Output is best effort: a failed write to the terminal does not change
// the step's outcome.
func (p *Printer) Step(title string, fn func() error) error {
	if o, ok := p.w.(Observer); ok {
		defer o.BeginStep(title)()
	}
	t0 := time.Now()
	p.begin(title)
	err := fn()
	p.end(title, err, time.Since(t0))
	return err
}

func (p *Printer) begin(title string) {
	switch {
	case p.log:
		_, _ = fmt.Fprintf(p.w, "• %s …\n", title)
	case p.tty:
		_, _ = fmt.Fprintf(p.w, " • %s …", title)
	}
}

func (p *Printer) end(title string, err error, took time.Duration) {
	mark := "✓"
	if err != nil {
		mark = "✗"
	}
	if p.log {
		if err != nil {
			_, _ = fmt.Fprintf(p.w, "%s %s (%.1fs): %v\n", mark, title, took.Seconds(), err)
			return
		}
		_, _ = fmt.Fprintf(p.w, "%s %s (%.1fs)\n", mark, title, took.Seconds())
		return
	}
	if p.tty {
		_, _ = fmt.Fprint(p.w, "\r\033[K")
	}
	_, _ = fmt.Fprintf(p.w, " %s %-54s %5.1fs\n", mark, title, took.Seconds())
}

// Printf prints a line that is not a step.
func (p *Printer) Printf(format string, args ...any) { _, _ = fmt.Fprintf(p.w, format, args...) }
