package namespacescope

import (
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Option customises a Holder or a Watcher.
type Option func(*options)

type options struct {
	clock clock.Clock
	log   logr.Logger
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

// WithLogger sets the logger; the default is controller-runtime's global logger.
func WithLogger(l logr.Logger) Option { return func(o *options) { o.log = l } }
