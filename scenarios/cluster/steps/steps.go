// Package steps prints a cluster provider's creation steps for a person, kind-style:
// "• Starting control plane …" while a step runs (on a terminal), then
// " ✓ Starting control plane  1.8s" or " ✗ …" when it ends.
package steps

import (
	"fmt"
	"io"
	"os"
	"time"
)

// Printer prints steps to one writer.
type Printer struct {
	w   io.Writer
	tty bool
}

// New returns a Printer writing to w (nil discards).
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

// Step runs fn as one named step and reports its outcome and duration. Output is best effort: a
// failed write to the terminal does not change the step's outcome.
func (p *Printer) Step(title string, fn func() error) error {
	t0 := time.Now()
	if p.tty {
		_, _ = fmt.Fprintf(p.w, " • %s …", title)
	}
	err := fn()
	mark := "✓"
	if err != nil {
		mark = "✗"
	}
	if p.tty {
		_, _ = fmt.Fprint(p.w, "\r\033[K")
	}
	_, _ = fmt.Fprintf(p.w, " %s %-54s %5.1fs\n", mark, title, time.Since(t0).Seconds())
	return err
}

// Printf prints a line that is not a step.
func (p *Printer) Printf(format string, args ...any) { _, _ = fmt.Fprintf(p.w, format, args...) }
