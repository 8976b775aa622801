package suiterun

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNeverMoreThanLimitAtOnce(t *testing.T) {
	var running, most atomic.Int32
	var ran sync.Map
	notStarted := EachAtMost(context.Background(), 9, 3, func(i int) {
		now := running.Add(1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
		ran.Store(i, true)
	})
	assert.Empty(t, notStarted)
	assert.Equal(t, int32(3), most.Load())
	for i := range 9 {
		_, ok := ran.Load(i)
		assert.True(t, ok, "job %d ran", i)
	}
}

func TestAHangingOrFailingJobDoesNotHoldUpTheOthers(t *testing.T) {
	hang := make(chan struct{})
	var others atomic.Int32
	done := make(chan []int)
	go func() {
		done <- EachAtMost(context.Background(), 5, 2, func(i int) {
			switch i {
			case 0:
				<-hang // a suite that hangs holds its own slot only
			case 1:
				return // a suite that fails at once frees its slot
			default:
				others.Add(1)
			}
		})
	}()
	assert.Eventually(t, func() bool { return others.Load() == 3 }, time.Second, time.Millisecond,
		"jobs 2–4 ran on the one free slot while job 0 hung")
	close(hang)
	assert.Empty(t, <-done)
}

func TestNothingStartsOnceCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	var started atomic.Int32
	done := make(chan []int)
	go func() {
		done <- EachAtMost(ctx, 5, 2, func(int) {
			started.Add(1)
			<-release
		})
	}()
	assert.Eventually(t, func() bool { return started.Load() == 2 }, time.Second, time.Millisecond)
	cancel()
	close(release)
	assert.Equal(t, []int{2, 3, 4}, <-done)
	assert.Equal(t, int32(2), started.Load())
}
