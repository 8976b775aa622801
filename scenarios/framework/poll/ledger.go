package poll

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Kind says how a Wait spent its time.
type Kind string

// The kinds of Wait.
const (
	// Awaited is an Until or UntilEvery: waiting for something to happen.
	Awaited Kind = "awaited"
	// Watched is a Throughout: watching that something does not happen.
	Watched Kind = "watched"
	// Slept is a Sleep: a fixed pause.
	Slept Kind = "slept"
)

// Wait is one wait of the process, as the ledger keeps it: what a profile of a run adds up to
// say where its time went.
type Wait struct {
	Kind Kind
	// Site is the file:line that waited: the first caller outside package poll and outside the
	// functions marked with Helper.
	Site string
	// What is what was awaited or watched, or why a Sleep paused.
	What string
	// Start is when the wait began, Took how long it lasted.
	Start time.Time
	Took  time.Duration
}

// ledgerSize bounds the ledger: a long run (a suite's polls every 250 ms for an hour are some
// 15 000) keeps its newest waits in a few megabytes.
const ledgerSize = 100_000

// waits is the process's ledger: Until, UntilEvery, Throughout and Sleep each add one Wait when
// they return.
var waits = newLedger(ledgerSize)

// Waits returns the waits of this process that started at or after since and have returned, in
// the order they returned. The ledger keeps the newest 100 000 waits; older ones are dropped.
func Waits(since time.Time) []Wait { return waits.since(since) }

// Sleep pauses for d, or until ctx ends (then it returns ctx's error), and records a Slept Wait:
// a scenario's fixed pause ("the load runs a margin before the first rotation") is written with
// it, so a profile of the run shows it with its reason. why says what the pause is for. A caller
// that goes on to the cluster may ignore the error: its next call fails on the same ended ctx.
func Sleep(ctx context.Context, why string, d time.Duration) error {
	defer record(Slept, why, time.Now())
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// Helper marks the calling function as a wait helper, as testing.T.Helper marks a test helper:
// a Wait it makes is placed at its caller's line. expect.Eventually is one; without the mark,
// every scenario's wait would be placed in package expect.
func Helper() {
	var pc [1]uintptr
	if runtime.Callers(2, pc[:]) == 0 {
		return
	}
	frame, _ := runtime.CallersFrames(pc[:]).Next()
	helpers.Store(frame.Function, true)
}

// helpers are the functions marked with Helper, by name.
var helpers sync.Map

// pollPackage prefixes the names of package poll's functions ("…/poll.UntilEvery").
var pollPackage = reflect.TypeFor[Wait]().PkgPath() + "."

// record adds the wait that started at start and ends now to the ledger.
func record(kind Kind, what string, start time.Time) {
	waits.add(Wait{Kind: kind, Site: site(), What: what, Start: start, Took: time.Since(start)})
}

// site is the file:line of the first caller outside package poll and the helpers. Frames of
// package runtime are passed over too: a deferred record may run under runtime.deferreturn.
func site() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		_, helper := helpers.Load(f.Function)
		if !helper && !strings.HasPrefix(f.Function, pollPackage) && !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		if !more {
			return "unknown"
		}
	}
}

// ledger keeps the newest size waits, in the order they were added.
type ledger struct {
	mu    sync.Mutex
	size  int
	waits []Wait // a ring once full: waits[oldest] is the oldest
	// oldest is where the next wait goes once the ring is full.
	oldest int
}

func newLedger(size int) *ledger { return &ledger{size: size} }

func (l *ledger) add(w Wait) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waits) < l.size {
		l.waits = append(l.waits, w)
		return
	}
	l.waits[l.oldest] = w
	l.oldest = (l.oldest + 1) % l.size
}

func (l *ledger) since(t time.Time) []Wait {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Wait
	for i := range l.waits {
		if w := l.waits[(l.oldest+i)%len(l.waits)]; !w.Start.Before(t) {
			out = append(out, w)
		}
	}
	return out
}
