package chart_test

import (
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
)

var testTimings = chart.LeaseTimings{Duration: 6 * time.Second, RenewInterval: 2 * time.Second, GracePeriod: 2 * time.Second}

func renderRelease(t *testing.T, r *chart.Release) objects {
	t.Helper()
	vals, err := r.ChartValues()
	require.NoError(t, err)
	objs, err := chart.RenderChart(testChart(t), r.Name, r.Namespace, vals)
	require.NoError(t, err)
	return objs
}

// The two releases of the topology render what CATALOG.md §M describes: the same lease
// timings on both operators, the CRDs only from the cluster-wide one, and webhook
// configurations that can coexist.
func TestTopologyRendersBothReleases(t *testing.T) {
	topo := release.NewTopology(testTimings)
	leaseArgs := []string{"--lease-duration=6s", "--lease-renew-interval=2s", "--lease-grace-period=2s"}

	a := renderRelease(t, topo.ClusterWide)
	assert.Subset(t, operatorArgs(t, a), append(leaseArgs, "--dgdr-default-image="+release.ClusterWideDGDRImage))
	assert.NotContains(t, operatorArgs(t, a), "--restrict-to-namespace="+release.TeamANamespace)
	assert.NotEmpty(t, a.ofKind("CustomResourceDefinition"), "the cluster-wide release installs the CRDs")
	for _, w := range allWebhooks(t, a, "dynamo-validating", "dynamo-mutating") {
		assert.Equal(t, admissionregistrationv1.Fail, ptrValue(w.failurePolicy), w.name)
		assert.Equal(t, &metav1.LabelSelector{}, w.namespaceSelector, w.name)
		assert.Equal(t, release.PlatformNamespace, w.clientConfig.Service.Namespace, w.name)
	}

	b := renderRelease(t, topo.Restricted)
	assert.Subset(t, operatorArgs(t, b), append(leaseArgs, "--restrict-to-namespace="+release.TeamANamespace, "--dgdr-default-image="+release.RestrictedDGDRImage))
	assert.Empty(t, b.ofKind("CustomResourceDefinition"), "the restricted release must not install the CRDs")
	for _, w := range allWebhooks(t, b, "dynamo-validating-team-a", "dynamo-mutating-team-a") {
		assert.Equal(t, admissionregistrationv1.Ignore, ptrValue(w.failurePolicy), w.name)
		assert.Equal(t, map[string]string{"kubernetes.io/metadata.name": release.TeamANamespace}, w.namespaceSelector.MatchLabels, w.name)
		assert.Equal(t, release.TeamANamespace, w.clientConfig.Service.Namespace, w.name)
	}

	// Cluster-scoped objects of the two releases must not collide.
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		for _, name := range a.names(kind) {
			assert.NotContains(t, b.names(kind), name, "both releases render %s %s", kind, name)
		}
	}
}

func TestLeaseTimingsRoundTrip(t *testing.T) {
	topo := release.NewTopology(testTimings)
	got, err := topo.LeaseTimings()
	require.NoError(t, err)
	assert.Equal(t, testTimings, got)
	assert.Equal(t, 8*time.Second, got.FailoverWindow())

	defaults, err := chart.LeaseTimingsOf(&chart.Release{})
	require.NoError(t, err)
	assert.Equal(t, chart.DefaultLeaseTimings(), defaults)

	_, err = chart.LeaseTimingsOf(&chart.Release{Values: map[string]any{"namespaceRestriction": map[string]any{"lease": map[string]any{"duration": "soon"}}}})
	assert.ErrorContains(t, err, "namespaceRestriction.lease.duration")
}

// Upgrading a release's timings must not change the release a suite still holds.
func TestWithLeaseTimingsLeavesTheOriginal(t *testing.T) {
	topo := release.NewTopology(testTimings)
	before := *topo.Restricted
	upgraded := topo.Restricted.WithLeaseTimings(chart.DefaultLeaseTimings())

	got, err := chart.LeaseTimingsOf(&upgraded)
	require.NoError(t, err)
	assert.Equal(t, chart.DefaultLeaseTimings(), got)
	still, err := chart.LeaseTimingsOf(&before)
	require.NoError(t, err)
	assert.Equal(t, testTimings, still)
	assert.Equal(t, release.TeamANamespace, upgraded.RestrictedNamespace(), "the other values survive")
	assert.False(t, upgraded.InstallsCRDs())
}
