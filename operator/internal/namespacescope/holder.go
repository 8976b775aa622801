package namespacescope

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
)

// ReleaseTimeout bounds the deletion of the Lease on the way out. Release runs on a context of
// its own because the caller's is usually already cancelled (SIGTERM) by then.
const ReleaseTimeout = 5 * time.Second

// Holder keeps a namespace-restricted operator's lock Lease in its namespace alive: it creates
// (or takes over) the Lease, renews it every RenewInterval, recreates it if someone deletes it,
// and deletes it on every way out. If it cannot renew in time it gives up before the Lease
// expires, so a cluster-wide operator never resumes validating the namespace while this one
// still does.
//
// It needs only namespaced permissions: get, create, update and delete on
// coordination.k8s.io leases in its namespace.
//
// Run Start (as a manager Runnable or in a goroutine): it takes the Lease — once the
// WithAcquireAfter condition holds, if one is given — unless Acquire already did; call Release
// on every way out, also those that skip Start's cleanup.
type Holder struct {
	leases    coordinationv1client.LeaseInterface
	namespace string
	identity  string
	timings   Timings
	clock     clock.Clock
	log       logr.Logger
	// acquireAfter, when set, must return nil before Start takes the Lease.
	acquireAfter func(context.Context) error

	// releasing stops renewals for good; it is set before Release waits for mu so an in-flight
	// renewal is abandoned rather than waited for.
	releasing atomic.Bool
	runMu     sync.Mutex
	cancelRun context.CancelFunc

	// mu serialises every write to the Lease, so a renewal can never recreate it after Release
	// deleted it.
	mu        sync.Mutex
	acquired  bool
	standby   bool
	lastRenew time.Time // renewTime of our last successful write, or when we last saw another holder's live Lease
}

// NewHolder returns a Holder for the Lease in namespace (the namespace the operator is
// restricted to), identified as identity (the pod name). leases is an uncached client, e.g.
// kubernetes.NewForConfig(cfg).CoordinationV1().
func NewHolder(leases coordinationv1client.LeasesGetter, namespace, identity string, t Timings, opts ...Option) (*Holder, error) {
	var errs []error
	if namespace == "" {
		errs = append(errs, errors.New("namespace lock: the namespace to hold the Lease in is empty (--restrict-to-namespace)"))
	}
	if identity == "" {
		errs = append(errs, errors.New("namespace lock: the holder identity is empty (--pod-name or $POD_NAME)"))
	}
	if err := t.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	o := buildOptions("namespace-lock", opts)
	return &Holder{
		leases:       leases.Leases(namespace),
		namespace:    namespace,
		identity:     identity,
		timings:      t,
		clock:        o.clock,
		acquireAfter: o.acquireAfter,
		log:          o.log.WithValues("lease", namespace+"/"+LeaseName, "holder", identity),
	}, nil
}

// NeedLeaderElection is false: every replica of a restricted operator serves webhooks and
// holds (or stands by for) the Lease.
func (h *Holder) NeedLeaderElection() bool { return false }

// Acquire creates the Lease, or takes it over if it exists, so that cluster-wide operators
// exclude the namespace. A Forbidden error names the permissions the operator lacks.
func (h *Holder) Acquire(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.releasing.Load() {
		return fmt.Errorf("acquiring Lease %s: the holder has been released", h.key())
	}
	if err := h.writeLocked(ctx, true); err != nil {
		return err
	}
	h.acquired = true
	return nil
}

// Start acquires the Lease if Acquire was not called (first waiting for the WithAcquireAfter
// condition), renews it until ctx is cancelled or Release is called, and then deletes it. It
// returns an error if the Lease cannot be acquired, cannot be renewed before it would expire, or
// cannot be deleted on the way out; the operator should exit non-zero on any of them.
func (h *Holder) Start(ctx context.Context) (err error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.runMu.Lock()
	h.cancelRun = cancel
	h.runMu.Unlock()

	defer func() {
		if releaseErr := h.Release(ctx); releaseErr != nil {
			if err == nil {
				err = releaseErr
			} else {
				h.log.Error(releaseErr, "could not delete the namespace lock Lease on the way out; it expires on its own")
			}
		}
	}()

	if h.releasing.Load() {
		return nil
	}
	h.mu.Lock()
	acquired := h.acquired
	h.mu.Unlock()
	if !acquired {
		if h.acquireAfter != nil {
			if err := h.acquireAfter(runCtx); err != nil {
				if runCtx.Err() != nil {
					return nil
				}
				return fmt.Errorf("before acquiring Lease %s: %w", h.key(), err)
			}
		}
		if err := h.Acquire(runCtx); err != nil {
			if h.releasing.Load() {
				return nil
			}
			return err
		}
	}
	return h.renewLoop(runCtx)
}

// Release stops renewing and deletes the Lease if this holder still holds it. It is safe to
// call more than once and concurrently with Start; it ignores the cancellation of ctx and
// gives up after ReleaseTimeout.
func (h *Holder) Release(ctx context.Context) error {
	h.releasing.Store(true)
	h.runMu.Lock()
	if h.cancelRun != nil {
		h.cancelRun()
	}
	h.runMu.Unlock()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	metrics.NamespaceLeaseHeld.WithLabelValues(h.namespace).Set(0)

	deleted := false
	err := retry.OnError(retry.DefaultRetry, apierrors.IsConflict, func() error {
		lease, err := h.leases.Get(ctx, LeaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return h.wrap("getting", err)
		}
		if holder := holderOf(lease); holder != h.identity {
			h.log.Info("leaving the namespace lock Lease in place: another operator holds it", "currentHolder", holder)
			return nil
		}
		// The preconditions make sure the Lease we delete is the one we just saw held by us,
		// not one another operator took over in between.
		err = h.leases.Delete(ctx, LeaseName, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion},
		})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return h.wrap("deleting", err)
		}
		deleted = true
		return nil
	})
	if deleted {
		h.log.Info("released the namespace lock Lease")
	}
	return err
}

// renewLoop renews the Lease every RenewInterval until ctx ends or renewing fails for so long
// that the next attempt would come after the Lease expired.
func (h *Holder) renewLoop(ctx context.Context) error {
	t := h.timings
	h.mu.Lock()
	next := h.lastRenew.Add(t.RenewInterval)
	h.mu.Unlock()
	for {
		timer := h.clock.NewTimer(next.Sub(h.clock.Now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C():
		}
		start := h.clock.Now()
		next = start.Add(t.RenewInterval)
		last, err := h.renew(ctx, start)
		if err == nil {
			continue
		}
		if ctx.Err() != nil || h.releasing.Load() {
			return nil
		}
		expires := last.Add(t.LeaseDuration)
		if t.tooLateToRetry(last, h.clock.Now()) {
			metrics.NamespaceLeaseHeld.WithLabelValues(h.namespace).Set(0)
			return fmt.Errorf("giving up the namespace lock Lease %s: last renewed at %s, it expires at %s, before the next renewal is due; "+
				"stopping so that a cluster-wide operator can take namespace %s over: %w",
				h.key(), last.Format(time.RFC3339Nano), expires.Format(time.RFC3339Nano), h.namespace, err)
		}
		h.log.Error(err, "renewing the namespace lock Lease failed; retrying", "lastRenewed", last, "expires", expires)
	}
}

// renew makes one renewal attempt, bounded so it ends before the Lease expires, and returns
// the time of the last successful renewal.
func (h *Holder) renew(ctx context.Context, start time.Time) (time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.releasing.Load() {
		return h.lastRenew, context.Canceled
	}
	deadline := h.timings.attemptDeadline(h.lastRenew, start)
	if !deadline.After(start) {
		return h.lastRenew, fmt.Errorf("renewing Lease %s: no time left before it expires", h.key())
	}
	attemptCtx, cancel := context.WithTimeout(ctx, deadline.Sub(start))
	defer cancel()
	err := h.writeLocked(attemptCtx, false)
	return h.lastRenew, err
}

// renewMargin is how long before the Lease expires a renewal attempt must have ended, so that
// giving up still happens while the Lease is valid. It leaves the first attempt after a
// successful renewal at least (LeaseDuration-RenewInterval)*3/4 to complete.
func (t Timings) renewMargin() time.Duration {
	return min(t.RenewInterval, t.LeaseDuration-t.RenewInterval) / 4
}

// attemptDeadline is when a renewal attempt started at start must end: after one
// RenewInterval, and never later than renewMargin before the Lease renewed at lastRenew expires.
func (t Timings) attemptDeadline(lastRenew, start time.Time) time.Time {
	deadline := start.Add(t.RenewInterval)
	if latest := lastRenew.Add(t.LeaseDuration - t.renewMargin()); latest.Before(deadline) {
		return latest
	}
	return deadline
}

// tooLateToRetry reports whether a holder whose renewal just failed at now must give up: the
// next renewal, at most one RenewInterval away, would not have time to finish renewMargin
// before the Lease renewed at lastRenew expires. This is the documented rule (time since the
// last renewal + RenewInterval must not exceed LeaseDuration), tightened by the margin so the
// holder has stopped, not merely started its last attempt, by the time the Lease expires.
func (t Timings) tooLateToRetry(lastRenew, now time.Time) bool {
	return now.Sub(lastRenew)+t.RenewInterval >= t.LeaseDuration-t.renewMargin()
}

// writeLocked creates, renews or takes over the Lease; with takeOver false it leaves a live
// Lease of another holder alone and stands by. Callers hold mu.
func (h *Holder) writeLocked(ctx context.Context, takeOver bool) error {
	return retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		now := h.clock.Now()
		lease, err := h.leases.Get(ctx, LeaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if _, err := h.leases.Create(ctx, h.newLease(now), metav1.CreateOptions{}); err != nil {
				return h.wrap("creating", err)
			}
			if h.acquired {
				h.log.Info("recreated the namespace lock Lease after it was deleted")
			} else {
				h.log.Info("created the namespace lock Lease")
			}
			h.markHeld(now)
			return nil
		}
		if err != nil {
			return h.wrap("getting", err)
		}

		previous := holderOf(lease)
		ours := previous == h.identity
		if !ours && !takeOver && now.Before(ActiveUntil(lease, h.timings.LeaseDuration, 0)) {
			// Another replica (typically the newer pod of a rolling update) took the Lease over
			// and keeps it alive; fighting back would only make the two flap. Watching it lets
			// this replica take over again if that one dies without cleaning up.
			if !h.standby {
				h.log.Info("another operator took over the namespace lock Lease; standing by", "currentHolder", previous)
				metrics.NamespaceLeaseHeld.WithLabelValues(h.namespace).Set(0)
			}
			h.standby = true
			h.lastRenew = now
			return nil
		}

		lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now))
		lease.Spec.LeaseDurationSeconds = ptr.To(h.timings.LeaseDurationSeconds())
		if !ours {
			lease.Spec.HolderIdentity = ptr.To(h.identity)
			lease.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(now))
			lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
		}
		if _, err := h.leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			return h.wrap("updating", err)
		}
		switch {
		case !ours:
			h.log.Info("took over the namespace lock Lease", "previousHolder", previous)
		case !h.acquired:
			h.log.Info("resumed holding the namespace lock Lease")
		default:
			h.log.V(1).Info("renewed the namespace lock Lease")
		}
		h.markHeld(now)
		return nil
	})
}

func (h *Holder) newLease(now time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:      LeaseName,
			Namespace: h.namespace,
			Labels:    map[string]string{"app.kubernetes.io/managed-by": "dynamo-operator"},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(h.identity),
			LeaseDurationSeconds: ptr.To(h.timings.LeaseDurationSeconds()),
			AcquireTime:          ptr.To(metav1.NewMicroTime(now)),
			RenewTime:            ptr.To(metav1.NewMicroTime(now)),
			LeaseTransitions:     ptr.To[int32](0),
		},
	}
}

func (h *Holder) markHeld(renewedAt time.Time) {
	h.lastRenew = renewedAt
	h.standby = false
	metrics.NamespaceLeaseHeld.WithLabelValues(h.namespace).Set(1)
}

func (h *Holder) key() string { return h.namespace + "/" + LeaseName }

// wrap names the action and the Lease, and for Forbidden the permissions that are missing.
func (h *Holder) wrap(action string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s Lease %s: %w (the operator's Role in namespace %s must allow get, create, update and delete on coordination.k8s.io leases)",
			action, h.key(), err, h.namespace)
	}
	return fmt.Errorf("%s Lease %s: %w", action, h.key(), err)
}
