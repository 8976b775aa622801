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
// since the suite started, long steps end with ✓ or ✗ and how long they took. It also keeps the
// suite's phases (its steps and scenarios) for the suite's profile.
type progress struct {
	w     io.Writer
	start time.Time
	mu    sync.Mutex

	phasesMu sync.Mutex
	phases   []phase
	running  int // phases begun and not yet ended
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

// step runs fn as one named step and reports its outcome; the writer keeps it as a phase.
func (p *progress) step(title string, fn func() error) error {
	return steps.NewLog(p.writer()).Step(title, fn)
}

// phase runs fn as a phase without printing it: for a span whose parts print themselves (the
// cluster's creation, which the provider reports step by step).
func (p *progress) phase(title string, fn func() error) error {
	end := p.begin(title)
	defer end()
	return fn()
}

// begin keeps a phase that starts now; the returned func ends it. A phase begun while another
// runs is nested in it: its time is part of the other's.
func (p *progress) begin(title string) (end func()) { return p.beginPhase(title, false) }

// beginAtOnce keeps a phase that starts now and runs at once with the others begun so (the
// scenarios of a suite's features that run at once): it is nested in none of them.
func (p *progress) beginAtOnce(title string) (end func()) { return p.beginPhase(title, true) }

func (p *progress) beginPhase(title string, atOnce bool) (end func()) {
	p.phasesMu.Lock()
	defer p.phasesMu.Unlock()
	i := len(p.phases)
	p.phases = append(p.phases, phase{title: title, start: time.Now(), nested: !atOnce && p.running > 0, atOnce: atOnce})
	p.running++
	return func() {
		p.phasesMu.Lock()
		defer p.phasesMu.Unlock()
		p.phases[i].took = time.Since(p.phases[i].start)
		p.running--
	}
}

// writer is an io.Writer that prefixes the lines written to it (the provider's own step
// lines) like printf does, and keeps each step printed through it as a phase: the suite's own
// steps and those a provider runs while it brings up or deletes a cluster.
func (p *progress) writer() io.Writer { return progressWriter{p} }

type progressWriter struct{ p *progress }

var _ steps.Observer = progressWriter{}

func (w progressWriter) BeginStep(title string) (end func()) { return w.p.begin(title) }

func (w progressWriter) Write(b []byte) (int, error) {
	w.p.printf("%s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
