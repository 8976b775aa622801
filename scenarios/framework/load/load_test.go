package load

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFailuresAreCountedAndTheFirstOnesQuoted(t *testing.T) {
	l := Start(context.Background(), 200, func(_ context.Context, n int) error {
		if n%2 == 1 {
			return fmt.Errorf("request %d refused", n)
		}
		return nil
	})
	require.NoError(t, l.WaitAnswered(context.Background(), 20, 5*time.Second))
	l.Stop()
	sent, failed := l.Counts()
	assert.GreaterOrEqual(t, sent, 20)
	assert.InDelta(t, sent/2, failed, 1, "every odd request fails")
	s := l.String()
	assert.Contains(t, s, fmt.Sprintf("%d requests in", sent))
	assert.Contains(t, s, fmt.Sprintf("%d failed", failed))
	assert.Contains(t, s, "first failures: at +")
	assert.Equal(t, maxFailureSamples, strings.Count(s, "refused"), "only the first failures are quoted: %s", s)
}

func TestASlowRequestDoesNotDelayTheNext(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	l := Start(context.Background(), 200, func(ctx context.Context, n int) error {
		if n == 0 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	defer once.Do(func() { close(release) })
	require.NoError(t, l.WaitAnswered(context.Background(), 10, 5*time.Second), "answers while request 0 is stuck")
	once.Do(func() { close(release) })
	l.Stop()
	sent, failed := l.Counts()
	assert.Zero(t, failed)
	assert.GreaterOrEqual(t, sent, 11, "request 0 was answered too before Stop returned")
}

func TestStopWaitsForTheRequestsInFlight(t *testing.T) {
	var mu sync.Mutex
	started, done := 0, 0
	l := Start(context.Background(), 100, func(context.Context, int) error {
		mu.Lock()
		started++
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		done++
		mu.Unlock()
		return errors.New("slow")
	})
	require.NoError(t, l.WaitAnswered(context.Background(), 1, 5*time.Second))
	l.Stop()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, started, done)
	sent, failed := l.Counts()
	assert.Equal(t, done, sent)
	assert.Equal(t, done, failed)
}
