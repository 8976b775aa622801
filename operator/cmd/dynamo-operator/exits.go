package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Every way this process ends must pass through run's return, because that is where a
// namespace-restricted operator deletes its lock Lease: an exit that skips it leaves the
// namespace validated by nobody until the Lease expires. The helpers here close the ways out
// that controller-runtime and Go would otherwise take directly.

// errForcedExit is run's error when a second termination signal cut the shutdown short.
var errForcedExit = errors.New("a second termination signal arrived during the shutdown: exiting without waiting for it to finish")

// shutdownSignals is controller-runtime's SetupSignalHandler without its os.Exit: the first
// SIGTERM or SIGINT cancels the returned context (a graceful shutdown); a second one closes
// forced. controller-runtime exits the process on the second signal, which skips run's
// deferred release of the namespace lock Lease; here run stops waiting for the shutdown and
// returns, releasing the Lease on its way out (bounded by namespacescope.ReleaseTimeout).
func shutdownSignals() (context.Context, <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	forced := make(chan struct{})
	// Buffered for both signals, so a second one sent right after the first is not dropped.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		cancel()
		<-signals
		close(forced)
	}()
	return ctx, forced
}

// startManager runs mgr until it stops, or until forced is closed: then it returns at once and
// leaves the manager's shutdown (up to its 30 s grace period) behind, so that run's deferred
// release still happens before the process ends. A nil forced never closes.
func startManager(ctx context.Context, forced <-chan struct{}, mgr manager.Manager) error {
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	select {
	case err := <-stopped:
		if err != nil {
			return fmt.Errorf("running the manager: %w", err)
		}
		return nil
	case <-forced:
		return errForcedExit
	}
}

// panicSafe runs a manager Runnable so that a panic in its Start becomes its error: the
// manager then stops and run returns, releasing the Lease, where the panic would have ended
// the process from the runnable's goroutine (a goroutine's panic runs no other goroutine's
// defers). It keeps the runnable's leader-election needs; name says which runnable panicked.
type panicSafe struct {
	name string
	manager.Runnable
}

// Start runs the wrapped runnable and turns a panic into an error that names it.
func (p panicSafe) Start(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the %s panicked: %v", p.name, r)
		}
	}()
	return p.Runnable.Start(ctx)
}

// NeedLeaderElection is the wrapped runnable's answer; true, as the manager assumes, when it
// does not say.
func (p panicSafe) NeedLeaderElection() bool {
	if l, ok := p.Runnable.(manager.LeaderElectionRunnable); ok {
		return l.NeedLeaderElection()
	}
	return true
}

// addPanicSafe adds r to mgr wrapped in panicSafe.
func addPanicSafe(mgr manager.Manager, name string, r manager.Runnable) error {
	if err := mgr.Add(panicSafe{name: name, Runnable: r}); err != nil {
		return fmt.Errorf("adding the %s to the manager: %w", name, err)
	}
	return nil
}
