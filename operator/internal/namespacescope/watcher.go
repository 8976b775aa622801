package namespacescope

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
)

// Watcher tells a cluster-wide operator which namespaces a namespace-restricted operator
// currently owns: those with a lock Lease that is still active. It implements the webhook
// package's ExclusionChecker.
//
// It needs list and watch on coordination.k8s.io leases in all namespaces (a ClusterRole); it
// only ever lists Leases named LeaseName.
type Watcher struct {
	client  kubernetes.Interface
	timings Timings
	clock   clock.Clock
	log     logr.Logger

	mu    sync.RWMutex
	locks map[string]*lock // by namespace

	// changed wakes the loop that flips NamespaceExcluded when a Lease expires, so it re-arms
	// its timer for the new earliest expiry.
	changed chan struct{}
	synced  chan struct{}
}

// lock is what the watcher knows about one namespace's Lease.
type lock struct {
	holder      string
	activeUntil time.Time
	// excluded is the state last reported (log line and gauge); Excluded itself always
	// compares activeUntil with the clock, so it is exact even before the report catches up.
	excluded bool
}

// NewWatcher returns a Watcher; run it with Start. Only t.GracePeriod and, for Leases that do
// not state their duration, t.LeaseDuration are used.
func NewWatcher(client kubernetes.Interface, t Timings, opts ...Option) (*Watcher, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	o := buildOptions("namespace-lock-watcher", opts)
	return &Watcher{
		client:  client,
		timings: t,
		clock:   o.clock,
		log:     o.log,
		locks:   map[string]*lock{},
		changed: make(chan struct{}, 1),
		synced:  make(chan struct{}),
	}, nil
}

// NeedLeaderElection is false: every replica answers admission requests.
func (w *Watcher) NeedLeaderElection() bool { return false }

// Excluded reports whether namespace has an active lock Lease, i.e. now is before
// renewTime + leaseDurationSeconds + GracePeriod. It is called on every admission request and
// only takes a read lock.
func (w *Watcher) Excluded(namespace string) bool {
	w.mu.RLock()
	l, ok := w.locks[namespace]
	var until time.Time
	if ok {
		until = l.activeUntil
	}
	w.mu.RUnlock()
	return ok && w.clock.Now().Before(until)
}

// HasSynced reports whether the initial list of lock Leases has been loaded; until then
// Excluded answers false for every namespace.
func (w *Watcher) HasSynced() bool {
	select {
	case <-w.synced:
		return true
	default:
		return false
	}
}

// WaitForSync blocks until the initial list of lock Leases is loaded or ctx ends.
func (w *Watcher) WaitForSync(ctx context.Context) error {
	select {
	case <-w.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the namespace lock Leases to be listed: %w", ctx.Err())
	}
}

// ReadyCheck is a healthz.Checker: the operator is not ready until it knows which namespaces
// to skip, so no admission request reaches it while it would wrongly validate them.
func (w *Watcher) ReadyCheck(_ *http.Request) error {
	if w.HasSynced() {
		return nil
	}
	return errors.New("namespace lock Leases not listed yet (the operator needs list and watch on coordination.k8s.io leases in all namespaces)")
}

// Start watches lock Leases in all namespaces until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	informer := coordinationinformers.NewFilteredLeaseInformer(w.client, metav1.NamespaceAll, 0, toolscache.Indexers{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", LeaseName).String()
		})
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.upsert,
		UpdateFunc: func(_, obj any) { w.upsert(obj) },
		DeleteFunc: w.remove,
	}); err != nil {
		return fmt.Errorf("watching Leases %s in all namespaces: %w", LeaseName, err)
	}
	go informer.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil // ctx ended before the first list; nothing to clean up
	}
	close(w.synced)
	w.log.Info("watching namespace lock Leases in all namespaces", "lease", LeaseName,
		"gracePeriod", w.timings.GracePeriod)

	var timer clock.Timer
	var expired <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if timer != nil {
			timer.Stop()
			timer, expired = nil, nil
		}
		if next := w.reportExpired(); !next.IsZero() {
			timer = w.clock.NewTimer(next.Sub(w.clock.Now()))
			expired = timer.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.changed:
		case <-expired:
		}
	}
}

// upsert records a created or updated Lease and reports the namespace excluded if it is a new
// exclusion.
func (w *Watcher) upsert(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || lease.Name != LeaseName {
		return
	}
	w.mu.Lock()
	l, ok := w.locks[lease.Namespace]
	if !ok {
		l = &lock{}
		w.locks[lease.Namespace] = l
	}
	l.holder = holderOf(lease)
	l.activeUntil = ActiveUntil(lease, w.timings.LeaseDuration, w.timings.GracePeriod)
	if !l.excluded && w.clock.Now().Before(l.activeUntil) {
		w.report(lease.Namespace, l, true, "")
	}
	w.mu.Unlock()
	w.wake()
}

// remove forgets a deleted Lease: its namespace is re-included at once.
func (w *Watcher) remove(obj any) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || lease.Name != LeaseName {
		return
	}
	w.mu.Lock()
	if l, ok := w.locks[lease.Namespace]; ok {
		if l.excluded {
			w.report(lease.Namespace, l, false, "deleted")
		}
		delete(w.locks, lease.Namespace)
	}
	w.mu.Unlock()
	w.wake()
}

// reportExpired re-includes namespaces whose Lease has expired since the last look and returns
// the earliest future expiry (zero if none).
func (w *Watcher) reportExpired() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	var next time.Time
	for ns, l := range w.locks {
		active := now.Before(l.activeUntil)
		if l.excluded && !active {
			w.report(ns, l, false, "expired")
		}
		if active && (next.IsZero() || l.activeUntil.Before(next)) {
			next = l.activeUntil
		}
	}
	return next
}

// report logs a transition once and keeps the gauge in step. Callers hold mu.
func (w *Watcher) report(namespace string, l *lock, excluded bool, why string) {
	l.excluded = excluded
	if excluded {
		metrics.NamespaceExcluded.WithLabelValues(namespace).Set(1)
		w.log.Info("namespace excluded: active lock Lease held by "+l.holder,
			"namespace", namespace, "holder", l.holder, "activeUntil", l.activeUntil)
		return
	}
	metrics.NamespaceExcluded.WithLabelValues(namespace).Set(0)
	w.log.Info("namespace re-included: lock Lease "+why, "namespace", namespace, "holder", l.holder)
}

func (w *Watcher) wake() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}
