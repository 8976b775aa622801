package suite

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/steps"
)

// progress prints what a suite is doing for a person watching: every line starts with the time
// since the suite started, long steps end with ✓ or ✗ and how long they took.
type progress struct {
	w     io.Writer
	start time.Time
	mu    sync.Mutex
}

func newProgress(w io.Writer) *progress { return &progress{w: w, start: time.Now()} }

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	for _, line := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		_, _ = fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), line) // progress is best effort
	}
}

// step runs fn as one named step and reports its outcome.
func (p *progress) step(title string, fn func() error) error {
	return steps.NewLog(p.writer()).Step(title, fn)
}

// writer is an io.Writer that prefixes the lines written to it (the provider's own step
// lines) like printf does.
func (p *progress) writer() io.Writer { return progressWriter{p} }

type progressWriter struct{ p *progress }

func (w progressWriter) Write(b []byte) (int, error) {
	w.p.printf("%s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
