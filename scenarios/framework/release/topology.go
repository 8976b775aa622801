package release

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// The documented multi-operator topology (CATALOG.md §M): a cluster-wide operator in
// PlatformNamespace, a namespace-restricted one serving TeamANamespace, and TeamBNamespace,
// a tenant only the cluster-wide operator serves.
const (
	PlatformNamespace = "platform-system"
	TeamANamespace    = "team-a"
	TeamBNamespace    = "team-b"
)

// NamespaceLockLease is the Lease a namespace-restricted operator holds in its namespace.
const NamespaceLockLease = "dynamo-operator-ns-lock"

// Default images the two operators of a Topology set on DynamoGraphDeploymentRequests that
// name none. They differ so that a user can tell from the object alone which operator mutated
// it.
const (
	ClusterWideDGDRImage = "registry.example.com/platform/dynamo-frontend:cluster-wide"
	RestrictedDGDRImage  = "registry.example.com/team-a/dynamo-frontend:restricted"
)

// Topology is the multi-operator topology: two releases of charts/dynamo-operator with the same
// lease timings — ClusterWide (namespaceRestriction.enabled=false, installs the CRDs) and
// Restricted (namespaceRestriction.enabled=true in its own namespace, crds.install=false) — and
// the tenant namespaces besides the restricted one.
type Topology struct {
	ClusterWide *chart.Release
	Restricted  *chart.Release
	// Tenants are namespaces with no operator of their own; the cluster-wide operator serves them.
	Tenants []string
	// NamespaceLabels label the tenant namespaces the topology creates, e.g. so a test suite
	// finds and removes them later.
	NamespaceLabels map[string]string
}

// NewTopology returns the documented topology with lease timings l: release "dynamo" in
// PlatformNamespace (cluster-wide) and release "dynamo" in TeamANamespace (restricted to it;
// the chart tells their cluster-scoped objects apart by the restricted namespace), tenant
// TeamBNamespace. Each operator defaults DGDR images to an image of its own
// (ClusterWideDGDRImage, RestrictedDGDRImage).
//
// The releases carry the values of the README's multi-operator install and nothing else about
// admission (TestTopologyInstallsWhatTheREADMESays): the restricted release's failurePolicy
// Ignore, which the documented failover needs, is the chart's default for a restricted release.
// The lease timings are the suite's (short, for speed) and each operator gets a DGDR default
// image of its own, so a scenario can tell which operator mutated an object.
func NewTopology(l chart.LeaseTimings) *Topology {
	clusterWide := chart.Release{
		Name: chart.DefaultReleaseName, Namespace: PlatformNamespace, Mode: chart.Automatic,
		Values: map[string]any{"dgdr": map[string]any{"defaultImage": ClusterWideDGDRImage}},
	}.WithLeaseTimings(l)
	restricted := chart.Release{
		Name: chart.DefaultReleaseName, Namespace: TeamANamespace, Mode: chart.Automatic,
		Values: map[string]any{
			"namespaceRestriction": map[string]any{"enabled": true},
			"crds":                 map[string]any{"install": false},
			"dgdr":                 map[string]any{"defaultImage": RestrictedDGDRImage},
		},
	}.WithLeaseTimings(l)
	return &Topology{ClusterWide: &clusterWide, Restricted: &restricted, Tenants: []string{TeamBNamespace}}
}

// RestrictedIn is another team's namespace-restricted operator: a release with the restricted
// release's values (lease timings included) in namespace ns, serving ns. Scenarios that stop
// several restricted operators at once install such releases beside the topology's.
func (t *Topology) RestrictedIn(ns string) *chart.Release {
	r := *t.Restricted
	r.Namespace = ns
	r.Values = chart.MergeValues(nil, t.Restricted.Values) // a deep copy: the releases share no map
	return &r
}

// LeaseTimings are the timings the restricted release is installed with.
func (t *Topology) LeaseTimings() (chart.LeaseTimings, error) {
	return chart.LeaseTimingsOf(t.Restricted)
}

// InstallClusterWide installs the cluster-wide release (and with it the CRDs), waits until its
// webhooks answer, and creates the tenant namespaces. It is the first half of Install, for
// callers that install the restricted release themselves.
func (t *Topology) InstallClusterWide(ctx context.Context, i *Installer, timeout time.Duration) error {
	if err := i.Install(ctx, t.ClusterWide); err != nil {
		return err
	}
	if err := i.WaitReady(ctx, t.ClusterWide, timeout); err != nil {
		return err
	}
	for _, ns := range t.Tenants {
		if err := ensureLabelledNamespace(ctx, i.kube, ns, t.NamespaceLabels); err != nil {
			return err
		}
	}
	return nil
}

// Install installs the whole topology in order — the cluster-wide release first, since it
// brings the CRDs the restricted one relies on — and waits until both answer admission and
// the restricted operator holds its Lease.
func (t *Topology) Install(ctx context.Context, i *Installer, timeout time.Duration) error {
	if err := t.InstallClusterWide(ctx, i, timeout); err != nil {
		return err
	}
	if err := i.Install(ctx, t.Restricted); err != nil {
		return err
	}
	if err := i.WaitReady(ctx, t.Restricted, timeout); err != nil {
		return err
	}
	_, err := WaitLeaseHeld(ctx, i.kube, t.Restricted, timeout)
	return err
}

// UpgradeLeaseTimings runs `helm upgrade` of both releases with lease timings l, waits for
// both rollouts and for the restricted operator's new pod to hold the Lease. The Topology's
// releases are replaced by the upgraded ones.
func (t *Topology) UpgradeLeaseTimings(ctx context.Context, i *Installer, l chart.LeaseTimings, timeout time.Duration) error {
	clusterWide, restricted := t.ClusterWide.WithLeaseTimings(l), t.Restricted.WithLeaseTimings(l)
	for _, r := range []*chart.Release{&clusterWide, &restricted} {
		if err := i.Upgrade(ctx, r); err != nil {
			return err
		}
	}
	for _, r := range []*chart.Release{&clusterWide, &restricted} {
		if err := i.WaitReady(ctx, r, timeout); err != nil {
			return err
		}
	}
	if _, err := WaitLeaseHeld(ctx, i.kube, &restricted, timeout); err != nil {
		return err
	}
	t.ClusterWide, t.Restricted = &clusterWide, &restricted
	i.logf("both operators run with %s", l)
	return nil
}

// WaitLeaseHeld waits until the namespace lock Lease of restricted release r is held by one of
// its running (not terminating) pods and was renewed within its duration, and returns it.
func WaitLeaseHeld(ctx context.Context, kube kubernetes.Interface, r *chart.Release, timeout time.Duration) (string, error) {
	ns := r.RestrictedNamespace()
	if ns == "" {
		return "", fmt.Errorf("%s is not namespace-restricted: it holds no Lease", r)
	}
	var holder string
	what := fmt.Sprintf("Lease %s/%s to be held by a running pod of %s", ns, NamespaceLockLease, r)
	err := poll.Until(ctx, what, timeout, func(ctx context.Context) (bool, string, error) {
		lease, err := kube.CoordinationV1().Leases(ns).Get(ctx, NamespaceLockLease, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "no Lease", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		pods, err := OperatorPods(ctx, kube, r)
		if err != nil {
			return false, err.Error(), nil
		}
		var running []string
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				running = append(running, p.Name)
			}
		}
		h := ""
		if lease.Spec.HolderIdentity != nil {
			h = *lease.Spec.HolderIdentity
		}
		seen := fmt.Sprintf("holder %q, renewed %s; running pods %v", h, describeMicroTime(lease.Spec.RenewTime), running)
		if !slices.Contains(running, h) || lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
			return false, seen, nil
		}
		if time.Since(lease.Spec.RenewTime.Time) > time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second {
			return false, seen + " (expired)", nil
		}
		holder = h
		return true, "", nil
	})
	return holder, err
}

func describeMicroTime(t *metav1.MicroTime) string {
	if t == nil {
		return "never"
	}
	return fmt.Sprintf("%s (%.1fs ago)", t.Format(time.RFC3339Nano), time.Since(t.Time).Seconds())
}

// ensureLabelledNamespace creates namespace ns with labels, or adds the labels to an existing one.
func ensureLabelledNamespace(ctx context.Context, kube kubernetes.Interface, ns string, labels map[string]string) error {
	existing, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: maps.Clone(labels)}}
		if _, err := kube.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Namespace %s: %w", ns, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting Namespace %s: %w", ns, err)
	}
	missing := false
	for k, v := range labels {
		if existing.Labels[k] != v {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	maps.Copy(existing.Labels, labels)
	if _, err := kube.CoreV1().Namespaces().Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("labelling Namespace %s with %s: %w", ns, strings.Join(slices.Sorted(maps.Keys(labels)), ","), err)
	}
	return nil
}
