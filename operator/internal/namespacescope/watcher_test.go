package namespacescope_test

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
	"github.com/gauntlet-dev/gauntlet/operator/internal/namespacescope"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startWatcher runs a Watcher until the test ends and waits for its first list.
func startWatcher(t *testing.T, c kubernetes.Interface, clk clock.Clock) (*namespacescope.Watcher, *logRecorder) {
	t.Helper()
	logs := &logRecorder{}
	w, err := namespacescope.NewWatcher(c, fastTimings, namespacescope.WithClock(clk), namespacescope.WithLogger(logs.logger()))
	require.NoError(t, err, "NewWatcher")
	require.Error(t, w.ReadyCheck(nil), "ReadyCheck passed before the watcher listed the Leases")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done, "Watcher.Start")
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, 10*time.Second)
	defer syncCancel()
	require.NoError(t, w.WaitForSync(syncCtx), "waiting for the watcher's first list")
	require.NoError(t, w.ReadyCheck(nil), "ReadyCheck after sync")
	return w, logs
}

// createLease creates a Lease as a namespace-restricted operator would have, renewed at renewed
// and lasting fastTimings.LeaseDuration.
func createLease(t *testing.T, ns, name, holder string, renewed time.Time) *coordinationv1.Lease {
	t.Helper()
	at := metav1.NewMicroTime(renewed)
	lease, err := admin.CoordinationV1().Leases(ns).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To(fastTimings.LeaseDurationSeconds()),
			AcquireTime:          &at,
			RenewTime:            &at,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "creating Lease %s/%s", ns, name)
	return lease
}

func TestWatcher(t *testing.T) {
	ctx := context.Background()
	// Whole seconds, so the Lease's microsecond timestamps hold the fake time exactly.
	t0 := time.Now().Truncate(time.Second)
	window := fastTimings.LeaseDuration + fastTimings.GracePeriod // 3s

	t.Run("M4 excludes a namespace until renewTime + leaseDuration + gracePeriod", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		w, logs := startWatcher(t, admin, clk)
		ns := newNamespace(t, "m4-expiry")
		excludedMsg := "namespace excluded: active lock Lease held by operator-b-0"
		expiredMsg := "namespace re-included: lock Lease expired"

		createLease(t, ns, namespacescope.LeaseName, "operator-b-0", t0)
		eventually(t, 5*time.Second, ns+" is excluded", func() bool { return w.Excluded(ns) })
		assert.InDelta(t, 1, gauge(t, metrics.NamespaceExcluded, ns), 0, "dynamo_namespace_excluded{namespace=%q}", ns)
		n := logs.count(ns, excludedMsg)
		assert.Equal(t, 1, n, "%q logged %d times, want once; logs:\n%s", excludedMsg, n, logs)

		clk.SetTime(t0.Add(window - time.Millisecond))
		require.True(t, w.Excluded(ns), "%s re-included 1ms before renewTime + %s", ns, window)
		clk.SetTime(t0.Add(window))
		require.False(t, w.Excluded(ns), "%s still excluded at renewTime + %s", ns, window)
		eventually(t, 5*time.Second, "the excluded gauge drops to 0 at expiry", func() bool {
			return gauge(t, metrics.NamespaceExcluded, ns) == 0
		})
		eventually(t, time.Second, "the re-inclusion is logged", func() bool { return logs.count(ns, expiredMsg) == 1 })
		clk.Step(time.Second)
		time.Sleep(100 * time.Millisecond)
		n = logs.count(ns, expiredMsg)
		assert.Equal(t, 1, n, "%q logged %d times, want once; logs:\n%s", expiredMsg, n, logs)

		// The holder comes back (M6): its renewal excludes the namespace again.
		renewed := metav1.NewMicroTime(clk.Now())
		lease := getLease(t, ns)
		lease.Spec.RenewTime = &renewed
		_, err := admin.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{})
		require.NoError(t, err, "renewing Lease %s/%s", ns, lease.Name)
		eventually(t, 5*time.Second, ns+" is excluded again after a renewal", func() bool { return w.Excluded(ns) })
		n = logs.count(ns, excludedMsg)
		assert.Equal(t, 2, n, "%q logged %d times after the renewal, want twice; logs:\n%s", excludedMsg, n, logs)
		assert.InDelta(t, 1, gauge(t, metrics.NamespaceExcluded, ns), 0, "dynamo_namespace_excluded{namespace=%q} after the renewal", ns)
	})

	t.Run("M5 re-includes a namespace at once when its Lease is deleted", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		w, logs := startWatcher(t, admin, clk)
		ns := newNamespace(t, "m5-deleted")
		createLease(t, ns, namespacescope.LeaseName, "operator-b-0", t0)
		eventually(t, 5*time.Second, ns+" is excluded", func() bool { return w.Excluded(ns) })

		require.NoError(t, admin.CoordinationV1().Leases(ns).Delete(ctx, namespacescope.LeaseName, metav1.DeleteOptions{}), "deleting Lease %s/%s", ns, namespacescope.LeaseName)
		// The fake clock does not move: only the deletion can re-include the namespace.
		eventually(t, 5*time.Second, ns+" is re-included", func() bool { return !w.Excluded(ns) })
		assert.InDelta(t, 0, gauge(t, metrics.NamespaceExcluded, ns), 0, "dynamo_namespace_excluded{namespace=%q}", ns)
		n := logs.count(ns, "namespace re-included: lock Lease deleted")
		assert.Equal(t, 1, n, "deletion logged %d times, want once; logs:\n%s", n, logs)
	})

	t.Run("ignores Leases with other names", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		w, _ := startWatcher(t, admin, clk)
		other := newNamespace(t, "other-lease")
		createLease(t, other, "some-controller-leader", "operator-b-0", t0)
		// Events arrive in order: once a later Lease is seen, the first one has been too.
		sentinel := newNamespace(t, "sentinel")
		createLease(t, sentinel, namespacescope.LeaseName, "operator-b-0", t0)
		eventually(t, 5*time.Second, sentinel+" is excluded", func() bool { return w.Excluded(sentinel) })
		assert.False(t, w.Excluded(other), "%s is excluded by a Lease named some-controller-leader", other)
	})

	t.Run("a Lease that exists before the watcher starts excludes as soon as it has synced", func(t *testing.T) {
		ns := newNamespace(t, "preexisting")
		createLease(t, ns, namespacescope.LeaseName, "operator-b-0", t0)
		w, _ := startWatcher(t, admin, clocktesting.NewFakeClock(t0))
		assert.True(t, w.Excluded(ns), "%s not excluded right after sync", ns)
		assert.False(t, w.Excluded("no-such-namespace"), "a namespace without a Lease is excluded")
	})

	t.Run("M5 a holder's graceful stop re-includes the namespace well before expiry", func(t *testing.T) {
		w, _ := startWatcher(t, admin, clock.RealClock{})
		ns := newNamespace(t, "m5-holder")
		h := acquiredHolder(t, admin, ns, "operator-b-0")
		r := start(h)
		eventually(t, 5*time.Second, ns+" is excluded", func() bool { return w.Excluded(ns) })
		r.cancel()
		stopped := time.Now()
		require.NoError(t, r.wait(t, 5*time.Second), "Start")
		eventually(t, window, ns+" is re-included", func() bool { return !w.Excluded(ns) })
		took := time.Since(stopped)
		assert.Less(t, took, fastTimings.LeaseDuration, "re-included %s after the stop, want well before the Lease could expire", took)
	})
}

// TestM8WatcherNeedsOnlyListAndWatch runs the watcher as a ServiceAccount whose only lease
// permissions are list and watch in all namespaces, as the chart deploys a cluster-wide operator.
func TestM8WatcherNeedsOnlyListAndWatch(t *testing.T) {
	ctx := context.Background()
	operatorNS := newNamespace(t, "m8-platform-system")
	const sa = "dynamo-operator"
	user, groups := serviceAccountUser(operatorNS, sa)

	name := operatorNS + "-leases"
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"list", "watch"},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "creating ClusterRole %s", name)
	t.Cleanup(func() { _ = admin.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}) })
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: operatorNS}},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "creating ClusterRoleBinding %s", name)
	t.Cleanup(func() { _ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}) })

	t.Run("M8 SubjectAccessReview allows watching leases everywhere", func(t *testing.T) {
		for _, verb := range []string{"list", "watch"} {
			awaitAllowed(t, user, groups, authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: verb})
		}
	})

	t.Run("M8 the ServiceAccount runs the watcher", func(t *testing.T) {
		w, _ := startWatcher(t, userClient(t, user, groups...), clock.RealClock{})
		ns := newNamespace(t, "m8-team-a")
		createLease(t, ns, namespacescope.LeaseName, "operator-b-0", time.Now())
		eventually(t, 5*time.Second, ns+" is excluded", func() bool { return w.Excluded(ns) })
	})
}
