package poll_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

func holds(context.Context) (bool, string, error) { return true, "", nil }

// nextLine is the file:line of the line after its caller's.
func nextLine(t *testing.T) string {
	t.Helper()
	_, file, line, ok := runtime.Caller(1)
	require.True(t, ok)
	return fmt.Sprintf("%s:%d", file, line+1)
}

// onlyWait is the one wait recorded since start.
func onlyWait(t *testing.T, start time.Time) poll.Wait {
	t.Helper()
	waits := poll.Waits(start)
	require.Len(t, waits, 1, "expected one wait recorded since %s, saw %+v", start, waits)
	return waits[0]
}

func TestAWaitIsPlacedAtTheLineThatWaited(t *testing.T) {
	start := time.Now()
	want := nextLine(t)
	require.NoError(t, poll.Until(context.Background(), "a condition that holds", time.Second, holds))
	assert.Equal(t, want, onlyWait(t, start).Site)
}

// waitFor is a wait helper, as expect.Eventually is one.
func waitFor(ctx context.Context, what string) error {
	poll.Helper()
	return poll.Until(ctx, what, time.Second, holds)
}

func TestAWaitOfAHelperIsPlacedAtTheHelpersCaller(t *testing.T) {
	start := time.Now()
	want := nextLine(t)
	require.NoError(t, waitFor(context.Background(), "a condition that holds"))
	assert.Equal(t, want, onlyWait(t, start).Site)
}

func TestEachWayToWaitRecordsItsKind(t *testing.T) {
	ctx := context.Background()
	fails := func(context.Context) (bool, string, error) { return false, "never", nil }
	for _, tc := range []struct {
		kind poll.Kind
		wait func() error
	}{
		{poll.Awaited, func() error { return poll.Until(ctx, "what", time.Second, holds) }},
		{poll.Awaited, func() error { return poll.UntilEvery(ctx, "what", time.Millisecond, 5*time.Millisecond, fails) }},
		{poll.Watched, func() error { return poll.Throughout(ctx, "what", time.Millisecond, 5*time.Millisecond, holds) }},
		{poll.Watched, func() error { return poll.Throughout(ctx, "what", time.Millisecond, 5*time.Millisecond, fails) }},
		{poll.Slept, func() error { return poll.Sleep(ctx, "what", time.Millisecond) }},
	} {
		start := time.Now()
		err := tc.wait()
		w := onlyWait(t, start)
		assert.Equal(t, tc.kind, w.Kind, "kind of a wait that returned %v", err)
		assert.Equal(t, "what", w.What)
		assert.Positive(t, w.Took)
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := poll.Sleep(ctx, "a pause cut short", time.Minute)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	w := onlyWait(t, start)
	assert.Equal(t, poll.Slept, w.Kind)
	assert.Less(t, w.Took, 10*time.Second, "expected the pause to end with its context, not after a minute")
}
