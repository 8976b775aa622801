package procnode

import "time"

// crashBackoff is kubelet's restart back-off for one container: the first restart is
// immediate, then 10 s, 20 s, 40 s … up to 5 min; a container that ran for longer than
// resetAfter before it exited starts over.
type crashBackoff struct {
	initial, max, resetAfter time.Duration
	current                  time.Duration
	started                  bool
}

func newCrashBackoff(initial, max time.Duration) *crashBackoff {
	return &crashBackoff{initial: initial, max: max, resetAfter: 2 * max}
}

// next returns how long to wait before restarting a container that exited after ranFor.
func (b *crashBackoff) next(ranFor time.Duration) time.Duration {
	if ranFor >= b.resetAfter {
		b.current, b.started = 0, false
	}
	if !b.started {
		b.started = true
		return 0
	}
	switch {
	case b.current == 0:
		b.current = b.initial
	case b.current*2 > b.max:
		b.current = b.max
	default:
		b.current *= 2
	}
	return b.current
}
