package poll

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	err := UntilEvery(context.Background(), "the third call", time.Millisecond, time.Second, func(context.Context) (bool, string, error) {
		calls++
		return calls == 3, "not yet", nil
	})
	require.NoError(t, err, "expected success on the third call, saw %v after %d calls", err, calls)
	require.Equal(t, 3, calls, "expected success on the third call, saw %v after %d calls", err, calls)
}

func TestUntilTimeoutSaysWhatItWaitedForAndWhatItLastSaw(t *testing.T) {
	calls := 0
	err := UntilEvery(context.Background(), "Godot", time.Millisecond, 50*time.Millisecond, func(context.Context) (bool, string, error) {
		calls++
		if calls > 1 {
			return false, "", nil // nothing to say: the state from before stands
		}
		return false, "an empty road", nil
	})
	want := regexp.MustCompile(`^waited [0-9.]+m?s for Godot; last seen: an empty road$`)
	require.Error(t, err, "expected an error matching %s, saw %v", want, err)
	require.Regexp(t, want, err.Error(), "expected an error matching %s, saw %v", want, err)
}

func TestUntilWithNothingSeen(t *testing.T) {
	err := UntilEvery(context.Background(), "x", time.Millisecond, 10*time.Millisecond, func(context.Context) (bool, string, error) {
		return false, "", nil
	})
	want := regexp.MustCompile(`; last seen: nothing yet$`)
	require.Error(t, err, "expected an error matching %s, saw %v", want, err)
	require.Regexp(t, want, err.Error(), "expected an error matching %s, saw %v", want, err)
}

func TestUntilStopsAtTheConditionsError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	err := Until(context.Background(), "x", time.Minute, func(context.Context) (bool, string, error) {
		calls++
		return false, "", boom
	})
	require.ErrorIs(t, err, boom, `expected "waiting for x: boom" after one call, saw %v after %d calls`, err, calls)
	require.Equal(t, "waiting for x: boom", err.Error(), `expected "waiting for x: boom" after one call, saw %v after %d calls`, err, calls)
	require.Equal(t, 1, calls, `expected "waiting for x: boom" after one call, saw %v after %d calls`, err, calls)
}

func TestUntilEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Until(ctx, "x", time.Minute, func(ctx context.Context) (bool, string, error) {
		return false, "cancelled", nil
	})
	want := regexp.MustCompile(`^waited .* for x; last seen: nothing yet$`)
	require.Error(t, err, "expected an error matching %s, saw %v", want, err)
	require.Regexp(t, want, err.Error(), "expected an error matching %s, saw %v", want, err)
}

func TestThroughoutHoldsForTheWholeDuration(t *testing.T) {
	calls := 0
	start := time.Now()
	err := Throughout(context.Background(), "the road empty", 5*time.Millisecond, 50*time.Millisecond, func(context.Context) (bool, string, error) {
		calls++
		return true, "", nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "expected the check to last the whole duration")
	require.Greater(t, calls, 2, "expected the condition checked repeatedly")
}

func TestThroughoutSaysWhatBrokeIt(t *testing.T) {
	calls := 0
	err := Throughout(context.Background(), "the road empty", time.Millisecond, time.Second, func(context.Context) (bool, string, error) {
		calls++
		return calls < 3, "Godot arrived", nil
	})
	want := regexp.MustCompile(`^expected the road empty throughout 1s; after [0-9.]+m?s: Godot arrived$`)
	require.Error(t, err)
	require.Regexp(t, want, err.Error())
	require.Equal(t, 3, calls, "expected the check to stop at the first break")
}

func TestThroughoutStopsAtTheConditionsError(t *testing.T) {
	err := Throughout(context.Background(), "the road empty", time.Millisecond, time.Second, func(context.Context) (bool, string, error) {
		return false, "", errors.New("no road")
	})
	require.EqualError(t, err, "checking the road empty: no road")
}

// The last check before the deadline runs to its end, and a timeout quotes what it saw.
func TestUntilTheLastCheckIsNotCutShortByTheDeadline(t *testing.T) {
	calls := 0
	err := UntilEvery(context.Background(), "a Deployment to be Available", time.Millisecond, 10*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		calls++
		select {
		case <-ctx.Done():
			return false, "rate: Wait(n=1) would exceed context deadline", nil
		case <-time.After(30 * time.Millisecond):
		}
		return false, fmt.Sprintf("0/1 available: pod CrashLoopBackOff (check %d)", calls), nil
	})
	require.Error(t, err)
	require.Regexp(t, `^waited [0-9.]+m?s for a Deployment to be Available; last seen: 0/1 available: pod CrashLoopBackOff \(check 1\)$`, err.Error())
}

func TestLedgerKeepsTheNewestWaits(t *testing.T) {
	l := newLedger(3)
	start := time.Now()
	for i := range 5 {
		l.add(Wait{What: fmt.Sprint(i), Start: start})
	}
	var kept []string
	for _, w := range l.since(start) {
		kept = append(kept, w.What)
	}
	require.Equal(t, []string{"2", "3", "4"}, kept)
}
