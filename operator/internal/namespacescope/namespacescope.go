// Package namespacescope coordinates a cluster-wide operator with namespace-restricted ones.
//
// A namespace-restricted operator holds a Lease named LeaseName in its namespace for as long as
// it runs (Holder). A cluster-wide operator watches those Leases in every namespace and steps
// back from a namespace while its Lease is active (Watcher), so an object is never validated
// twice with different rules. A Lease stays active until
// renewTime + leaseDurationSeconds + GracePeriod; with the defaults a restricted operator that
// dies without cleaning up is taken over by the cluster-wide one after about 30 seconds, and one
// that stops gracefully deletes its Lease so the takeover is immediate.
package namespacescope

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// LeaseName is the name of the lock Lease a namespace-restricted operator holds in its namespace.
const LeaseName = "dynamo-operator-ns-lock"

// Defaults for Timings: a Lease is renewed every 10 s, lasts 25 s, and a cluster-wide operator
// waits a further 5 s before taking a namespace back, about 30 s in total.
const (
	DefaultLeaseDuration = 25 * time.Second
	DefaultRenewInterval = 10 * time.Second
	DefaultGracePeriod   = 5 * time.Second
)

// Flag names of the timings, used by BindFlags and in validation errors.
const (
	FlagLeaseDuration = "lease-duration"
	FlagRenewInterval = "lease-renew-interval"
	FlagGracePeriod   = "lease-grace-period"
)

// Timings configures the lock Lease on both sides. The holder uses LeaseDuration and
// RenewInterval; the watcher uses GracePeriod, and LeaseDuration only for a Lease that does not
// say how long it lasts.
type Timings struct {
	// LeaseDuration is written to the Lease as spec.leaseDurationSeconds, so it must be a whole
	// number of seconds.
	LeaseDuration time.Duration
	// RenewInterval is how often the holder renews; it must be shorter than LeaseDuration.
	RenewInterval time.Duration
	// GracePeriod is how long past the Lease's expiry a watcher still treats it as active, to
	// absorb clock skew and a holder's last in-flight renewal.
	GracePeriod time.Duration
}

// DefaultTimings returns the documented defaults (25 s / 10 s / 5 s).
func DefaultTimings() Timings {
	return Timings{LeaseDuration: DefaultLeaseDuration, RenewInterval: DefaultRenewInterval, GracePeriod: DefaultGracePeriod}
}

// BindFlags registers --lease-duration, --lease-renew-interval and --lease-grace-period on fs,
// defaulting to the values already in t.
func (t *Timings) BindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&t.LeaseDuration, FlagLeaseDuration, t.LeaseDuration,
		"How long a namespace lock Lease lasts without renewal (whole seconds).")
	fs.DurationVar(&t.RenewInterval, FlagRenewInterval, t.RenewInterval,
		"How often a namespace-restricted operator renews its lock Lease; shorter than --"+FlagLeaseDuration+".")
	fs.DurationVar(&t.GracePeriod, FlagGracePeriod, t.GracePeriod,
		"How long past a lock Lease's expiry a cluster-wide operator keeps skipping its namespace.")
}

// Validate reports every invalid timing, naming the flag that sets it.
func (t Timings) Validate() error {
	var errs []error
	if t.LeaseDuration <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive, got %s", FlagLeaseDuration, t.LeaseDuration))
	} else if t.LeaseDuration > math.MaxInt32*time.Second {
		errs = append(errs, fmt.Errorf("--%s must be at most %ds (the Lease's spec.leaseDurationSeconds is an int32), got %s",
			FlagLeaseDuration, math.MaxInt32, t.LeaseDuration))
	} else if t.LeaseDuration%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--%s must be a whole number of seconds (it is stored as the Lease's spec.leaseDurationSeconds), got %s",
			FlagLeaseDuration, t.LeaseDuration))
	}
	if t.RenewInterval <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive, got %s", FlagRenewInterval, t.RenewInterval))
	} else if t.LeaseDuration > 0 && t.RenewInterval >= t.LeaseDuration {
		errs = append(errs, fmt.Errorf("--%s (%s) must be shorter than --%s (%s), or the Lease expires between renewals",
			FlagRenewInterval, t.RenewInterval, FlagLeaseDuration, t.LeaseDuration))
	}
	if t.GracePeriod < 0 {
		errs = append(errs, fmt.Errorf("--%s must not be negative, got %s", FlagGracePeriod, t.GracePeriod))
	}
	return errors.Join(errs...)
}

// LeaseDurationSeconds is LeaseDuration as the Lease's spec.leaseDurationSeconds, clamped to
// int32 (Validate rejects a duration outside it).
func (t Timings) LeaseDurationSeconds() int32 {
	s := int64(t.LeaseDuration / time.Second)
	if s < 0 {
		return 0
	}
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(s)
}

// FailoverWindow is the longest a cluster-wide operator keeps skipping a namespace whose
// restricted operator died without deleting its Lease, counted from the last renewal.
func (t Timings) FailoverWindow() time.Duration { return t.LeaseDuration + t.GracePeriod }

// CacheOptions returns the manager cache options for an operator restricted to namespace: the
// cache lists and watches only that namespace, so the operator needs no cluster-wide read
// permissions. An empty namespace means cluster-wide and returns the zero options.
func CacheOptions(namespace string) cache.Options {
	if namespace == "" {
		return cache.Options{}
	}
	return cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}}
}

// ActiveUntil is the instant a lock Lease stops excluding its namespace:
// renewTime + leaseDurationSeconds + grace. A Lease never renewed counts from its acquireTime,
// and one without either from its creation; a Lease that does not state its duration is assumed
// to last defaultDuration.
func ActiveUntil(lease *coordinationv1.Lease, defaultDuration, grace time.Duration) time.Time {
	var start time.Time
	switch {
	case lease.Spec.RenewTime != nil:
		start = lease.Spec.RenewTime.Time
	case lease.Spec.AcquireTime != nil:
		start = lease.Spec.AcquireTime.Time
	default:
		start = lease.CreationTimestamp.Time
	}
	duration := defaultDuration
	if lease.Spec.LeaseDurationSeconds != nil {
		duration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	return start.Add(duration + grace)
}

// holderOf names a Lease's holder for logs; an empty identity is spelled out.
func holderOf(lease *coordinationv1.Lease) string {
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return "<no holder>"
	}
	return *lease.Spec.HolderIdentity
}
