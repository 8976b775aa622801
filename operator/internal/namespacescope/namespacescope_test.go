package namespacescope_test

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gauntlet-dev/gauntlet/operator/internal/namespacescope"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultTimings(t *testing.T) {
	d := namespacescope.DefaultTimings()
	require.NoError(t, d.Validate(), "default timings are invalid")
	got := d.FailoverWindow()
	assert.Equal(t, 30*time.Second, got, "documented failover window is about 30s, defaults give %s", got)
}

func TestTimingsValidate(t *testing.T) {
	valid := namespacescope.DefaultTimings()
	tests := []struct {
		name  string
		edit  func(*namespacescope.Timings)
		wants []string // substrings of the error; none means valid
	}{
		{name: "defaults", edit: func(*namespacescope.Timings) {}},
		{name: "zero grace is allowed", edit: func(t *namespacescope.Timings) { t.GracePeriod = 0 }},
		{name: "zero lease duration", edit: func(t *namespacescope.Timings) { t.LeaseDuration = 0 },
			wants: []string{"--lease-duration must be positive"}},
		{name: "fractional lease duration", edit: func(t *namespacescope.Timings) { t.LeaseDuration = 2500 * time.Millisecond },
			wants: []string{"--lease-duration must be a whole number of seconds", "2.5s"}},
		{name: "negative renew interval", edit: func(t *namespacescope.Timings) { t.RenewInterval = -time.Second },
			wants: []string{"--lease-renew-interval must be positive"}},
		{name: "renew interval equal to lease duration", edit: func(t *namespacescope.Timings) { t.RenewInterval = t.LeaseDuration },
			wants: []string{"--lease-renew-interval (25s) must be shorter than --lease-duration (25s)"}},
		{name: "negative grace period", edit: func(t *namespacescope.Timings) { t.GracePeriod = -time.Second },
			wants: []string{"--lease-grace-period must not be negative"}},
		{name: "every problem is reported", edit: func(t *namespacescope.Timings) {
			*t = namespacescope.Timings{LeaseDuration: -1, RenewInterval: 0, GracePeriod: -1}
		}, wants: []string{"--lease-duration", "--lease-renew-interval", "--lease-grace-period"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			timings := valid
			tc.edit(&timings)
			err := timings.Validate()
			if len(tc.wants) == 0 {
				require.NoError(t, err, "Validate() = %v, want nil", err)
				return
			}
			require.Error(t, err, "Validate() = nil, want an error mentioning %q", tc.wants)
			for _, want := range tc.wants {
				assert.Contains(t, err.Error(), want, "Validate() = %q, want it to mention %q", err, want)
			}
		})
	}
}

func TestActiveUntil(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	micro := func(t time.Time) *metav1.MicroTime { return ptr.To(metav1.NewMicroTime(t)) }
	tests := []struct {
		name  string
		spec  coordinationv1.LeaseSpec
		want  time.Time
		grace time.Duration
	}{
		{name: "renewTime + leaseDurationSeconds + grace",
			spec:  coordinationv1.LeaseSpec{RenewTime: micro(t0), AcquireTime: micro(t0.Add(-time.Hour)), LeaseDurationSeconds: ptr.To[int32](25)},
			grace: 5 * time.Second, want: t0.Add(30 * time.Second)},
		{name: "acquireTime when never renewed",
			spec:  coordinationv1.LeaseSpec{AcquireTime: micro(t0), LeaseDurationSeconds: ptr.To[int32](25)},
			grace: 5 * time.Second, want: t0.Add(30 * time.Second)},
		{name: "creation time when neither is set",
			spec:  coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](2)},
			grace: time.Second, want: t0.Add(-time.Minute).Add(3 * time.Second)},
		{name: "the watcher's lease duration when the Lease states none",
			spec:  coordinationv1.LeaseSpec{RenewTime: micro(t0)},
			grace: 5 * time.Second, want: t0.Add(12*time.Second + 5*time.Second)},
		{name: "no grace",
			spec: coordinationv1.LeaseSpec{RenewTime: micro(t0), LeaseDurationSeconds: ptr.To[int32](2)},
			want: t0.Add(2 * time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lease := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))},
				Spec:       tc.spec,
			}
			got := namespacescope.ActiveUntil(lease, 12*time.Second, tc.grace)
			assert.True(t, got.Equal(tc.want), "ActiveUntil() = %s, want %s", got, tc.want)
		})
	}
}

func TestCacheOptions(t *testing.T) {
	restricted := namespacescope.CacheOptions("team-a")
	require.Len(t, restricted.DefaultNamespaces, 1, "restricted cache namespaces = %v, want only team-a", restricted.DefaultNamespaces)
	assert.Contains(t, restricted.DefaultNamespaces, "team-a", "restricted cache namespaces = %v, want team-a", restricted.DefaultNamespaces)
	clusterWide := namespacescope.CacheOptions("")
	assert.Nil(t, clusterWide.DefaultNamespaces, "cluster-wide cache namespaces = %v, want none (all namespaces)", clusterWide.DefaultNamespaces)
}
