package namespacescope

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Option customises a Holder or a Watcher.
type Option func(*options)

type options struct {
	clock        clock.Clock
	log          logr.Logger
	acquireAfter func(context.Context) error
}

func buildOptions(name string, opts []Option) options {
	o := options{clock: clock.RealClock{}, log: ctrllog.Log.WithName(name)}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithClock replaces the wall clock, so tests can move time instead of waiting for it.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithAcquireAfter makes a Holder's Start wait for ready to return nil before it takes the
// Lease; an error from ready ends Start with it (ready ending because Start's context did is a
// stop, not an error). A namespace-restricted operator waits for the API server to reach its
// webhooks. Watchers ignore it.
func WithAcquireAfter(ready func(context.Context) error) Option {
	return func(o *options) { o.acquireAfter = ready }
}

// WithLogger sets the logger; the default is controller-runtime's global logger.
func WithLogger(l logr.Logger) Option { return func(o *options) { o.log = l } }
