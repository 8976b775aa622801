package namespacescope_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
	"github.com/gauntlet-dev/gauntlet/operator/internal/namespacescope"
)

func newHolder(t *testing.T, c kubernetes.Interface, ns, identity string) *namespacescope.Holder {
	t.Helper()
	h, err := namespacescope.NewHolder(c.CoordinationV1(), ns, identity, fastTimings)
	if err != nil {
		t.Fatalf("NewHolder: %v", err)
	}
	return h
}

// acquiredHolder is newHolder after a successful Acquire.
func acquiredHolder(t *testing.T, c kubernetes.Interface, ns, identity string) *namespacescope.Holder {
	t.Helper()
	h := newHolder(t, c, ns, identity)
	if err := h.Acquire(context.Background()); err != nil {
		t.Fatalf("Acquire in %s as %s: %v", ns, identity, err)
	}
	return h
}

// running is a Holder's Start in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(h *namespacescope.Holder) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- h.Start(ctx) }()
	return r
}

// wait returns Start's result, failing the test if it does not return within timeout.
func (r *running) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(timeout):
		t.Fatalf("Start did not return within %s", timeout)
		return nil
	}
}

// stop cancels Start and waits for it, as a test's cleanup: a cancelled Start returns nil.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := r.wait(t, 5*time.Second); err != nil {
		t.Errorf("Start after cancellation = %v, want nil", err)
	}
}

func leaseGone(t *testing.T, ns string) bool {
	t.Helper()
	_, err := admin.CoordinationV1().Leases(ns).Get(context.Background(), namespacescope.LeaseName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("getting Lease %s/%s: %v", ns, namespacescope.LeaseName, err)
	}
	return apierrors.IsNotFound(err)
}

// leaseHolder is the holder of the namespace's Lease, "" when there is none or it cannot be
// read. It does not fail the test, so assert.Never may call it from its own goroutine.
func leaseHolder(ns string) string {
	lease, err := admin.CoordinationV1().Leases(ns).Get(context.Background(), namespacescope.LeaseName, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

func TestHolder(t *testing.T) {
	ctx := context.Background()

	t.Run("M1 Acquire creates the Lease with RenewTime set at creation", func(t *testing.T) {
		ns := newNamespace(t, "m1-create")
		h := acquiredHolder(t, admin, ns, "operator-b-0")
		t.Cleanup(func() { _ = h.Release(ctx) })

		lease := getLease(t, ns)
		if got := ptr.Deref(lease.Spec.HolderIdentity, ""); got != "operator-b-0" {
			t.Errorf("holderIdentity = %q, want the pod name operator-b-0", got)
		}
		if got := ptr.Deref(lease.Spec.LeaseDurationSeconds, 0); got != 2 {
			t.Errorf("leaseDurationSeconds = %d, want 2", got)
		}
		if lease.Spec.RenewTime == nil || lease.Spec.AcquireTime == nil {
			t.Fatalf("renewTime = %v, acquireTime = %v: both must be set on create", lease.Spec.RenewTime, lease.Spec.AcquireTime)
		}
		if !lease.Spec.RenewTime.Equal(lease.Spec.AcquireTime) {
			t.Errorf("renewTime %s differs from acquireTime %s on a new Lease", lease.Spec.RenewTime, lease.Spec.AcquireTime)
		}
		if got := gauge(t, metrics.NamespaceLeaseHeld, ns); got != 1 {
			t.Errorf("dynamo_namespace_lease_held{namespace=%q} = %v, want 1", ns, got)
		}
	})

	t.Run("M1 Start renews the Lease", func(t *testing.T) {
		ns := newNamespace(t, "m1-renew")
		h := acquiredHolder(t, admin, ns, "operator-b-0")
		first := getLease(t, ns).Spec.RenewTime.Time
		r := start(h)
		t.Cleanup(func() { r.stop(t) })

		var renewals []time.Time
		eventually(t, 3*time.Second, "the Lease was renewed twice", func() bool {
			renewed := getLease(t, ns).Spec.RenewTime.Time
			if renewed.After(first) && (len(renewals) == 0 || renewed.After(renewals[len(renewals)-1])) {
				renewals = append(renewals, renewed)
			}
			return len(renewals) >= 2
		})
		if gap := renewals[1].Sub(renewals[0]); gap < 400*time.Millisecond || gap > 1500*time.Millisecond {
			t.Errorf("renewals %s apart, want about the 500ms renew interval", gap)
		}
		if got := getLease(t, ns).Spec.AcquireTime.Time; !got.Equal(first) {
			t.Errorf("acquireTime changed from %s to %s on renewal", first, got)
		}
	})

	t.Run("M5 cancelling Start deletes the Lease", func(t *testing.T) {
		ns := newNamespace(t, "m5-cancel")
		h := newHolder(t, admin, ns, "operator-b-0")
		r := start(h) // without Acquire: Start acquires itself
		eventually(t, 3*time.Second, "Start created the Lease", func() bool { return !leaseGone(t, ns) })
		r.cancel()
		if err := r.wait(t, 5*time.Second); err != nil {
			t.Fatalf("Start after cancellation = %v, want nil", err)
		}
		if !leaseGone(t, ns) {
			t.Error("the Lease still exists after a graceful stop")
		}
		if got := gauge(t, metrics.NamespaceLeaseHeld, ns); got != 0 {
			t.Errorf("dynamo_namespace_lease_held{namespace=%q} = %v after stop, want 0", ns, got)
		}
	})

	t.Run("Start takes the Lease only once the WithAcquireAfter condition holds", func(t *testing.T) {
		ns := newNamespace(t, "acquire-after")
		served := make(chan struct{})
		h, err := namespacescope.NewHolder(admin.CoordinationV1(), ns, "operator-b-0", fastTimings,
			namespacescope.WithAcquireAfter(func(ctx context.Context) error {
				select {
				case <-served:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}))
		require.NoError(t, err)
		r := start(h)
		t.Cleanup(func() { r.stop(t) })
		time.Sleep(time.Second) // two renew intervals of fastTimings
		assert.True(t, leaseGone(t, ns), "expected no Lease before the condition holds: the namespace would be excluded while this operator is not reachable")
		close(served)
		eventually(t, 3*time.Second, "Start created the Lease once the condition held", func() bool { return !leaseGone(t, ns) })
	})

	t.Run("a Start stopped while it waits for the WithAcquireAfter condition returns nil and leaves no Lease", func(t *testing.T) {
		ns := newNamespace(t, "acquire-after-stop")
		h, err := namespacescope.NewHolder(admin.CoordinationV1(), ns, "operator-b-0", fastTimings,
			namespacescope.WithAcquireAfter(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }))
		require.NoError(t, err)
		start(h).stop(t)
		assert.True(t, leaseGone(t, ns))
	})

	t.Run("a WithAcquireAfter condition that fails ends Start with its error, without a Lease", func(t *testing.T) {
		ns := newNamespace(t, "acquire-after-fails")
		h, err := namespacescope.NewHolder(admin.CoordinationV1(), ns, "operator-b-0", fastTimings,
			namespacescope.WithAcquireAfter(func(context.Context) error { return errors.New("probe broke") }))
		require.NoError(t, err)
		err = start(h).wait(t, 5*time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "probe broke")
		assert.True(t, leaseGone(t, ns))
	})

	t.Run("M5 Release deletes the Lease, stops renewing and is idempotent", func(t *testing.T) {
		ns := newNamespace(t, "m5-release")
		h := acquiredHolder(t, admin, ns, "operator-b-0")
		r := start(h)
		t.Cleanup(r.cancel)

		// Release runs on a context of its own: a cancelled one must not stop the deletion.
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if err := h.Release(cancelled); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if !leaseGone(t, ns) {
			t.Fatal("the Lease still exists after Release")
		}
		if err := r.wait(t, 2*time.Second); err != nil {
			t.Errorf("Start after Release = %v, want nil", err)
		}
		if err := h.Release(ctx); err != nil {
			t.Errorf("second Release = %v, want nil", err)
		}
		assert.Never(t, func() bool { return leaseHolder(ns) != "" }, 2*fastTimings.RenewInterval, fastTimings.RenewInterval/10,
			"the Lease came back after Release: the holder kept renewing")
	})

	t.Run("recreates the Lease when someone deletes it", func(t *testing.T) {
		ns := newNamespace(t, "recreate")
		h := newHolder(t, admin, ns, "operator-b-0")
		r := start(h)
		t.Cleanup(func() { r.stop(t) })
		eventually(t, 3*time.Second, "Start created the Lease", func() bool { return !leaseGone(t, ns) })
		old := getLease(t, ns)
		if err := admin.CoordinationV1().Leases(ns).Delete(ctx, namespacescope.LeaseName, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting Lease %s/%s: %v", ns, namespacescope.LeaseName, err)
		}
		eventually(t, 3*time.Second, "the holder recreated the Lease", func() bool {
			lease, err := admin.CoordinationV1().Leases(ns).Get(ctx, namespacescope.LeaseName, metav1.GetOptions{})
			return err == nil && lease.UID != old.UID
		})
		if lease := getLease(t, ns); lease.Spec.RenewTime == nil || ptr.Deref(lease.Spec.HolderIdentity, "") != "operator-b-0" {
			t.Errorf("recreated Lease spec = %+v, want holder operator-b-0 with a renewTime", lease.Spec)
		}
	})

	t.Run("takes over an existing Lease", func(t *testing.T) {
		ns := newNamespace(t, "takeover")
		old := metav1.NewMicroTime(time.Now().Add(-time.Hour))
		if _, err := admin.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: namespacescope.LeaseName},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("operator-b-old"), LeaseDurationSeconds: ptr.To[int32](2),
				AcquireTime: &old, RenewTime: &old, LeaseTransitions: ptr.To[int32](3)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating Lease %s/%s: %v", ns, namespacescope.LeaseName, err)
		}
		h := acquiredHolder(t, admin, ns, "operator-b-new")
		t.Cleanup(func() { _ = h.Release(ctx) })
		lease := getLease(t, ns)
		if got := ptr.Deref(lease.Spec.HolderIdentity, ""); got != "operator-b-new" {
			t.Errorf("holderIdentity = %q, want operator-b-new", got)
		}
		if got := ptr.Deref(lease.Spec.LeaseTransitions, 0); got != 4 {
			t.Errorf("leaseTransitions = %d, want 4", got)
		}
		if !lease.Spec.RenewTime.Equal(lease.Spec.AcquireTime) || !lease.Spec.RenewTime.After(old.Time) {
			t.Errorf("renewTime %s / acquireTime %s: want both reset to the takeover time", lease.Spec.RenewTime, lease.Spec.AcquireTime)
		}
	})

	t.Run("an older replica stands by and leaves a Lease taken over by a newer one in place", func(t *testing.T) {
		ns := newNamespace(t, "handover")
		older := newHolder(t, admin, ns, "operator-b-old")
		r := start(older)
		t.Cleanup(r.cancel)
		eventually(t, 3*time.Second, "the older replica created the Lease", func() bool { return !leaseGone(t, ns) })

		newer := newHolder(t, admin, ns, "operator-b-new")
		if err := newer.Acquire(ctx); err != nil {
			t.Fatalf("Acquire by the newer replica: %v", err)
		}
		newerRun := start(newer)
		t.Cleanup(func() { newerRun.stop(t) })

		// A few renew intervals: the older replica must not fight for the Lease.
		require.Never(t, func() bool { h := leaseHolder(ns); return h != "" && h != "operator-b-new" }, 4*fastTimings.RenewInterval, fastTimings.RenewInterval/10,
			"the older replica took the Lease back from the newer one")
		r.cancel()
		if err := r.wait(t, 5*time.Second); err != nil {
			t.Fatalf("older replica's Start = %v, want nil", err)
		}
		if leaseGone(t, ns) {
			t.Fatal("the older replica deleted a Lease the newer one holds")
		}
	})

	t.Run("a client without permissions gets an error naming the Lease and the missing permissions", func(t *testing.T) {
		ns := newNamespace(t, "forbidden")
		h := newHolder(t, userClient(t, "no-permissions"), ns, "operator-b-0")
		err := h.Acquire(ctx)
		if err == nil {
			t.Fatal("Acquire without permissions succeeded")
		}
		for _, want := range []string{
			"getting Lease " + ns + "/" + namespacescope.LeaseName,
			"forbidden",
			"must allow get, create, update and delete on coordination.k8s.io leases",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Acquire error %q does not mention %q", err, want)
			}
		}
	})

	t.Run("gives up before the Lease expires when renewals start failing", func(t *testing.T) {
		ns := newNamespace(t, "giveup")
		user := "giveup-operator"
		binding := grantInNamespace(t, ns, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}, holderRole)
		h := acquiredHolder(t, userClient(t, user), ns, "operator-b-0")
		acquired := getLease(t, ns).Spec.RenewTime.Time
		r := start(h)
		t.Cleanup(r.cancel)
		eventually(t, 3*time.Second, "the Lease was renewed", func() bool { return getLease(t, ns).Spec.RenewTime.After(acquired) })

		if err := admin.RbacV1().RoleBindings(ns).Delete(ctx, binding, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("revoking RoleBinding %s/%s: %v", ns, binding, err)
		}
		err := r.wait(t, 2*fastTimings.LeaseDuration)
		gaveUpAt := time.Now()
		if err == nil || !strings.Contains(err.Error(), "giving up the namespace lock Lease") {
			t.Fatalf("Start = %v, want it to give up the Lease", err)
		}
		// The last renewal that got through is what a cluster-wide operator counts from.
		expires := getLease(t, ns).Spec.RenewTime.Add(fastTimings.LeaseDuration)
		t.Logf("gave up %s before the Lease's expiry: %v", expires.Sub(gaveUpAt).Round(time.Millisecond), err)
		if !gaveUpAt.Before(expires) {
			t.Errorf("gave up at %s, after the Lease expired at %s", gaveUpAt.Format(time.StampMilli), expires.Format(time.StampMilli))
		}
		if got := gauge(t, metrics.NamespaceLeaseHeld, ns); got != 0 {
			t.Errorf("dynamo_namespace_lease_held{namespace=%q} = %v after giving up, want 0", ns, got)
		}
	})
}

// TestM8RestrictedHolderNeedsNoClusterPermissions runs the holder as a ServiceAccount with only
// a namespaced Role, as the chart deploys a namespace-restricted operator.
func TestM8RestrictedHolderNeedsNoClusterPermissions(t *testing.T) {
	ns := newNamespace(t, "m8-team-a")
	const sa = "dynamo-operator"
	user, groups := serviceAccountUser(ns, sa)
	grantInNamespace(t, ns, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}, holderRole)

	leases := func(verb, namespace string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: verb, Namespace: namespace}
	}

	t.Run("M8 SubjectAccessReview denies every cluster-scoped lease permission", func(t *testing.T) {
		for _, verb := range []string{"get", "list", "watch", "create", "update", "delete"} {
			if allowed(t, user, groups, leases(verb, metav1.NamespaceAll)) {
				t.Errorf("%s may %s leases in all namespaces", user, verb)
			}
			if allowed(t, user, groups, leases(verb, "kube-system")) {
				t.Errorf("%s may %s leases in another namespace (kube-system)", user, verb)
			}
		}
	})

	t.Run("M8 SubjectAccessReview allows what the holder does in its namespace", func(t *testing.T) {
		for _, verb := range []string{"get", "create", "update", "delete"} {
			if !allowed(t, user, groups, leases(verb, ns)) {
				t.Errorf("%s may not %s leases in %s", user, verb, ns)
			}
		}
	})

	t.Run("M8 the ServiceAccount runs the holder with the namespaced Role alone", func(t *testing.T) {
		h := acquiredHolder(t, userClient(t, user, groups...), ns, "operator-b-0")
		r := start(h)
		acquired := getLease(t, ns).Spec.RenewTime.Time
		eventually(t, 3*time.Second, "the Lease was renewed", func() bool { return getLease(t, ns).Spec.RenewTime.After(acquired) })
		r.cancel()
		if err := r.wait(t, 5*time.Second); err != nil {
			t.Fatalf("Start as %s = %v, want nil", user, err)
		}
		if !leaseGone(t, ns) {
			t.Error("the Lease still exists after a graceful stop")
		}
	})
}
