// Package poll is the harness's one way to wait: it checks a condition until it holds and, when
// it does not in time, says what was awaited, for how long and what was last seen instead —
// "waited 1m0s for Deployment dynamo-system/dynamo-operator to be Available; last seen: 0/1
// replicas available, …". Scenario failure messages quote that sentence. Every wait, and every
// fixed pause written with Sleep, is kept in a ledger (Waits) that a suite's profile adds up.
// The package depends on nothing else of the workspace, so providers, the process node and the
// bench can all use it.
package poll

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Interval is how often Until checks again.
const Interval = 250 * time.Millisecond

// Condition reports whether what is awaited holds and, when it does not, what it saw instead
// (the "last seen" state a timeout error quotes). An error aborts the wait.
type Condition func(ctx context.Context) (done bool, seen string, err error)

// Until checks cond every Interval until it holds, the timeout passes or ctx ends. The error
// says what was awaited, for how long, and what was last seen:
// "waited <d> for <what>; last seen: <state>"; an error from cond ends the wait at once as
// "waiting for <what>: <err>".
func Until(ctx context.Context, what string, timeout time.Duration, cond Condition) error {
	return UntilEvery(ctx, what, Interval, timeout, cond)
}

// CheckTimeout bounds one check of a condition. A check is not cut short by the wait's deadline
// (it may end up to CheckTimeout past it): the last one's view is what a timeout error quotes,
// and a check cut short by the deadline sees only its own cancellation ("client rate limiter
// Wait returned an error: rate: Wait(n=1) would exceed context deadline") instead of, say, the
// crash-looping pod that kept a Deployment from becoming Available.
const CheckTimeout = 15 * time.Second

// UntilEvery is Until checking every interval instead of every Interval: for waits on local
// processes, where a quarter of a second is long next to the wait itself.
func UntilEvery(ctx context.Context, what string, interval, timeout time.Duration, cond Condition) error {
	start := time.Now()
	defer record(Awaited, what, start)
	seen := "nothing yet"
	var condErr error
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(context.Context) (bool, error) {
		checkCtx, cancel := context.WithTimeout(ctx, CheckTimeout)
		defer cancel()
		done, s, err := cond(checkCtx)
		if err != nil {
			condErr = err
			return false, err
		}
		// A check cut short (an interrupt, CheckTimeout) says nothing about what it looked at;
		// keep the previous view.
		if s != "" && checkCtx.Err() == nil {
			seen = s
		}
		return done, nil
	})
	switch {
	case condErr != nil:
		return fmt.Errorf("waiting for %s: %w", what, condErr)
	case err != nil:
		return fmt.Errorf("waited %s for %s; last seen: %s", time.Since(start).Round(100*time.Millisecond), what, seen)
	}
	return nil
}

// Throughout checks cond every interval for duration and fails as soon as it does not hold:
// for what must never happen ("the pod is not Ready"). The error says what was expected, for
// how long, and what broke it: "expected <what> throughout <d>; after <t>: <state>"; an error
// from cond ends the check as "checking <what>: <err>".
func Throughout(ctx context.Context, what string, interval, duration time.Duration, cond Condition) error {
	start := time.Now()
	defer record(Watched, what, start)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		holds, seen, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("checking %s: %w", what, err)
		}
		if !holds {
			return fmt.Errorf("expected %s throughout %s; after %s: %s", what, duration, time.Since(start).Round(100*time.Millisecond), seen)
		}
		if time.Since(start) >= duration {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("checking %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}
