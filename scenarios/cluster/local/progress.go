package local

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progress prints one line per step, kind-style: "• Starting control plane …" while it runs
// (on a terminal), then " ✓ Starting control plane  1.8s" or " ✗ …" when it ends.
type progress struct {
	w   io.Writer
	tty bool
}

func newProgress(w io.Writer) *progress {
	if w == nil {
		w = io.Discard
	}
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// step runs fn as one named step and reports its outcome and duration.
func (p *progress) step(title string, fn func() error) error {
	t0 := time.Now()
	if p.tty {
		fmt.Fprintf(p.w, " • %s …", title)
	}
	err := fn()
	mark := "✓"
	if err != nil {
		mark = "✗"
	}
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, " %s %-54s %5.1fs\n", mark, title, time.Since(t0).Seconds())
	return err
}

func (p *progress) printf(format string, args ...any) { fmt.Fprintf(p.w, format, args...) }
