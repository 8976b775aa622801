package suiterun

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// CancelOnSignal returns a context that ends at the first SIGINT or SIGTERM, which makes Run
// interrupt every running suite. note hears of every such signal (first: whether it was the
// first). Later signals end nothing: the suites are deleting their clusters then, and a runner
// that exited would leave them unwatched and the terminal to their output. stop releases the
// signals.
func CancelOnSignal(parent context.Context, note func(sig os.Signal, first bool)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		first := true
		for {
			select {
			case sig := <-sigs:
				note(sig, first)
				first = false
				cancel()
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
