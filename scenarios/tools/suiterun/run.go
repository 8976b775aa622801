// Package suiterun runs e2e suites at once (`make e2e`, E2E_JOBS): each suite as its own
// `go test` process in its own cluster, at most Jobs at a time, its whole output in
// <output>/<suite>/go-test.log, followed line by line to show what every running suite is
// doing; a suite that fails or hangs holds only its own slot. An interrupt reaches every
// running suite, which deletes its cluster as it would at its end, and the run waits for them.
// Before any suite starts, the machine is checked for the memory, open-file and inotify room
// Jobs suites take (CheckCapacity).
//
// The suites know nothing of it: it reads what they print (suite.ParseProgressLine) and
// write (summary.json).
package suiterun

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// LogFile is the name of a suite's full output in its output directory.
const LogFile = "go-test.log"

// Options of a run.
type Options struct {
	// Suites are run in this order, as slots free up.
	Suites []string
	// Jobs is how many run at once (at least 1).
	Jobs int
	// Dir is where suite name reports (its --e2e-output/<suite name>: summary.json, artifacts),
	// emptied before it starts; the run writes its log there.
	Dir func(name string) string
	// Command makes the process that runs suite name (GoTest); the run sets its output and
	// adds suite.RunLogEnv to its environment.
	Command func(ctx context.Context, name string) *exec.Cmd
	Display Display
	// Tick is how often a live display is redrawn (default a second).
	Tick time.Duration
}

// GoTest is how `make e2e` runs a suite: `go test -count=1 -v -timeout <timeout>
// ./e2e/<suite> -args <args>` in the workspace root, interruptible as a process group
// (suite.InterruptibleCommand: SIGINT to go test and the suite, then InterruptGrace to delete
// its cluster).
func GoTest(root, timeout string, args []string) func(ctx context.Context, name string) *exec.Cmd {
	return func(ctx context.Context, name string) *exec.Cmd {
		cmd := suite.InterruptibleCommand(ctx, "go", append([]string{"test", "-count=1", "-v", "-timeout", timeout, "./e2e/" + name, "-args"}, args...)...)
		cmd.Dir = root
		return cmd
	}
}

// Runner runs the suites of its Options once.
type Runner struct {
	o Options

	mu     sync.Mutex
	start  time.Time
	suites []SuiteState
}

// New prepares a run of o.Suites.
func New(o Options) *Runner {
	r := &Runner{o: o, start: time.Now()}
	for _, name := range o.Suites {
		dir := o.Dir(name)
		r.suites = append(r.suites, SuiteState{Name: name, Dir: dir, Log: filepath.Join(dir, LogFile)})
	}
	return r
}

// Run runs every suite, at most Jobs at once, and returns how each ended. Once ctx ends (an
// interrupt) no suite starts and the running ones are interrupted; Run returns when they have
// exited.
func (r *Runner) Run(ctx context.Context) []SuiteState {
	r.mu.Lock()
	r.start = time.Now()
	r.mu.Unlock()
	stopTicking := r.tick()
	notStarted := EachAtMost(ctx, len(r.o.Suites), r.o.Jobs, func(i int) { r.runSuite(ctx, i) })
	stopTicking()
	r.change(func() []Event {
		var evs []Event
		for _, i := range notStarted {
			r.suites[i].Status = NotStarted
			evs = append(evs, Event{Kind: SuiteEnded, Suite: i})
		}
		return append(evs, Event{Kind: RunEnded})
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]SuiteState(nil), r.suites...)
}

// Note shows text to the person running the suites; it is safe to call at any time.
func (r *Runner) Note(text string) {
	r.change(func() []Event { return []Event{{Kind: Message, Text: text}} })
}

// change runs fn, which changes the suites' states and says how, under the run's lock, and
// shows what it returned.
func (r *Runner) change(fn func() []Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := fn()
	f := Frame{Suites: r.suites, Start: r.start, Now: time.Now()}
	for _, ev := range evs {
		r.o.Display.Show(ev, f)
	}
}

// tick redraws the display every Tick until the returned func is called.
func (r *Runner) tick() (stop func()) {
	every := r.o.Tick
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-t.C:
				r.change(func() []Event { return []Event{{Kind: Changed}} })
			case <-done:
				return
			}
		}
	}()
	return func() {
		t.Stop()
		close(done)
		wg.Wait()
	}
}

func (r *Runner) runSuite(ctx context.Context, i int) {
	name := r.o.Suites[i]
	exit := func() error {
		dir := r.suites[i].Dir
		// An earlier run's summary must not stand for this one, should this one write none.
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
		log, err := os.Create(r.suites[i].Log)
		if err != nil {
			return err
		}
		defer func() { _ = log.Close() }() // written through; a failed close loses no line already written
		out := &lineWriter{w: log, line: func(line string) { r.observe(i, line) }}
		cmd := r.o.Command(ctx, name)
		cmd.Env = append(cmd.Environ(), suite.RunLogEnv+"="+r.suites[i].Log)
		cmd.Stdout, cmd.Stderr = out, out
		r.change(func() []Event {
			r.suites[i].Status, r.suites[i].Started, r.suites[i].Activity = Running, time.Now(), buildingActivity
			return []Event{{Kind: SuiteStarted, Suite: i}}
		})
		err = cmd.Run()
		out.flush()
		return err
	}()
	var sum *report.Summary
	if s, err := report.ReadSummary(filepath.Join(r.suites[i].Dir, report.SummaryFile)); err == nil {
		sum = &s
	}
	r.change(func() []Event {
		if r.suites[i].Status != Running { // it could not even start
			r.suites[i].Started = time.Now()
		}
		r.suites[i].end(time.Now(), exit, sum)
		return []Event{{Kind: SuiteEnded, Suite: i}}
	})
}

// observe follows suite i through one line of its output.
func (r *Runner) observe(i int, line string) {
	r.change(func() []Event {
		ev, ok := r.suites[i].observe(line)
		switch {
		case !ok:
			return nil
		case ev.Kind == suite.ScenarioEnded:
			return []Event{{Kind: ScenarioEnded, Suite: i, Scenario: ev}}
		default:
			return []Event{{Kind: Changed, Suite: i, Scenario: ev}}
		}
	})
}

// lineWriter writes through to w and hands every complete line to line.
type lineWriter struct {
	w       io.Writer
	line    func(string)
	partial []byte
}

// Write never fails: were it to, exec would stop reading the suite's output and the suite
// would block on a full pipe. A log that cannot be written loses lines, not the suite.
func (l *lineWriter) Write(p []byte) (int, error) {
	_, _ = l.w.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

// flush hands on a last line that ended without a newline.
func (l *lineWriter) flush() {
	if len(l.partial) > 0 {
		l.line(string(l.partial))
		l.partial = nil
	}
}
