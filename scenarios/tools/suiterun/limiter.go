package suiterun

import (
	"context"
	"sync"
)

// EachAtMost calls fn(i) for every i in [0, n), in order, with at most limit calls running at
// once, and returns when every call it started has returned. How a call ends does not matter
// to the others. Once ctx is done it starts no more calls and returns the i it did not start.
func EachAtMost(ctx context.Context, n, limit int, fn func(i int)) (notStarted []int) {
	slots := make(chan struct{}, max(1, limit))
	var wg sync.WaitGroup
	for i := range n {
		if !takeSlot(ctx, slots) {
			notStarted = append(notStarted, i)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			fn(i)
		}()
	}
	wg.Wait()
	return notStarted
}

// takeSlot waits for a free slot; false when ctx ended first (or at the same time).
func takeSlot(ctx context.Context, slots chan struct{}) bool {
	select {
	case <-ctx.Done():
		return false
	case slots <- struct{}{}:
		if ctx.Err() != nil {
			<-slots
			return false
		}
		return true
	}
}
