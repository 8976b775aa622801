// Package load sends requests at a constant rate, open loop, and counts the ones that fail: the
// admission load that certificate rotations and rollouts run under. What one request is — which
// object, which answer counts as a success — is the caller's send; the package only paces,
// counts and reports.
package load

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// Send makes request n (0, 1, 2, …) and says how it failed, or nil when it succeeded.
type Send func(ctx context.Context, n int) error

// RequestTimeout bounds one request: an admission webhook's own timeout is at most 30 s, so a
// request outliving that is stuck.
const RequestTimeout = 30 * time.Second

// maxFailureSamples bounds how many failure messages a report quotes.
const maxFailureSamples = 5

// Load is a constant rate of requests in flight until Stop. It is open loop: a slow request does
// not delay the next one, so a stall shows up as failures or latency instead of silently
// lowering the rate.
type Load struct {
	interval time.Duration // between two requests

	mu       sync.Mutex
	sent     int
	failed   int
	samples  []string // the first few failures, with their time
	slowest  time.Duration
	started  time.Time
	stopped  time.Time
	stop     context.CancelFunc
	inflight sync.WaitGroup
}

// Start sends perSecond requests per second with send until Stop. Each request gets its own
// context, bounded by RequestTimeout and not cancelled by Stop: Stop waits for the answers.
func Start(ctx context.Context, perSecond int, send Send) *Load {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &Load{interval: time.Second / time.Duration(perSecond), stop: cancel, started: time.Now()}
	l.inflight.Go(func() {
		tick := time.NewTicker(l.interval)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			l.inflight.Go(func() {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RequestTimeout)
				defer cancel()
				start := time.Now()
				err := send(rctx, n)
				l.record(start, time.Since(start), err)
			})
		}
	})
	return l
}

func (l *Load) record(at time.Time, took time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent++
	l.slowest = max(l.slowest, took)
	if err == nil {
		return
	}
	l.failed++
	if len(l.samples) < maxFailureSamples {
		l.samples = append(l.samples, fmt.Sprintf("at +%.1fs: %v", at.Sub(l.started).Seconds(), err))
	}
}

// Stop ends the load and waits for the requests in flight.
func (l *Load) Stop() {
	l.stop()
	l.inflight.Wait()
	l.mu.Lock()
	l.stopped = time.Now()
	l.mu.Unlock()
}

// Counts are the requests answered so far and how many of them failed.
func (l *Load) Counts() (sent, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent, l.failed
}

// WaitAnswered waits until n more requests than now have been answered (failed ones too): the
// load has run through that much of whatever happens meanwhile.
func (l *Load) WaitAnswered(ctx context.Context, n int, timeout time.Duration) error {
	from, _ := l.Counts()
	return poll.UntilEvery(ctx, fmt.Sprintf("%d more answers to the admission load", n), l.interval, timeout, func(context.Context) (bool, string, error) {
		sent, _ := l.Counts()
		return sent-from >= n, l.String(), nil
	})
}

// String summarises the load: requests, failures, rate, slowest request and the first failures.
func (l *Load) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	end := l.stopped
	if end.IsZero() {
		end = time.Now()
	}
	secs := end.Sub(l.started).Seconds()
	s := fmt.Sprintf("%d requests in %.1fs (%.1f/s), %d failed, slowest %s", l.sent, secs, float64(l.sent)/secs, l.failed, l.slowest.Round(time.Millisecond))
	if len(l.samples) > 0 {
		s += "; first failures: " + strings.Join(l.samples, " | ")
	}
	return s
}

// ExpectNoFailures stops the load, puts its requests, failures and slowest request into the
// scenario's details, and fails the test when any request failed; through names what the load
// ran through ("through the renewal").
func (l *Load) ExpectNoFailures(ctx context.Context, t *testing.T, through string) {
	t.Helper()
	l.Stop()
	sent, failed := l.Counts()
	l.mu.Lock()
	slowest := l.slowest
	l.mu.Unlock()
	suite.Note(ctx, t, "requests", sent)
	suite.Note(ctx, t, "failures", failed)
	suite.Note(ctx, t, "slowestRequestSeconds", math.Round(slowest.Seconds()*1000)/1000)
	t.Logf("admission load %s: %s", through, l)
	if failed > 0 {
		expect.Errorf(t, "expected 0 failed admissions %s, saw %s", through, l)
	}
}
