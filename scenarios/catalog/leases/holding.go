package leases

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// leaseHeld is M1: B holds the Lease in team-a — renewTime set from its creation on, renewed
// every renewInterval — and A sees the namespace as excluded.
func (s *scenarios) leaseHeld() types.Feature {
	var holder string
	return features.New("the restricted operator holds Lease dynamo-operator-ns-lock in its namespace and renews it").
		WithLabel(suite.LabelScenario, "M1").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			holder = s.opB().settled(ctx, t, suite.ClusterFrom(ctx, t))
			return ctx
		}).
		Assess("B's pod holds the Lease with renewTime set and the configured duration", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			a, b := s.opA(), s.opB()
			ns := b.rel.RestrictedNamespace()
			timings, err := s.topo.LeaseTimings()
			expect.NoError(t, err, "reading the lease timings of the topology")
			l := readLease(ctx, t, c, ns)
			if l == nil {
				expect.Fatalf(t, "expected Lease %s/%s held by %s; there is none", ns, release.NamespaceLockLease, holder)
			}
			expect.Equal(t, "holderIdentity of Lease "+ns+"/"+release.NamespaceLockLease, holder, holderOf(l))
			if l.Spec.RenewTime == nil || l.Spec.AcquireTime == nil {
				expect.Errorf(t, "expected renewTime and acquireTime set on %s", describeLease(l))
			}
			want := int64(timings.Duration / time.Second)
			if l.Spec.LeaseDurationSeconds == nil || int64(*l.Spec.LeaseDurationSeconds) != want {
				expect.Errorf(t, "expected leaseDurationSeconds %d (%s) on %s", want, timings, describeLease(l))
			}
			mB, err := b.scrape(ctx, c)
			expect.NoError(t, err, "scraping %s", b)
			expect.Equal(t, fmt.Sprintf("%s{namespace=%q} of %s", metricLeaseHeld, ns, b), 1.0, mB.Sum(metricLeaseHeld, map[string]string{labelNamespace: ns}))
			entries, err := a.readLogs(ctx, c)
			expect.NoError(t, err, "reading the logs of %s", a)
			if !slices.ContainsFunc(entries, func(e logEntry) bool {
				return e.Namespace == ns && strings.HasPrefix(e.Msg, msgExcluded)
			}) {
				expect.Errorf(t, "expected %s to log %q about %s; it did not", a, msgExcluded+"<pod>", ns)
			}
			return ctx
		}).
		Assess("B renews the Lease every renewInterval", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			ns := s.opB().rel.RestrictedNamespace()
			timings, err := s.topo.LeaseTimings()
			expect.NoError(t, err, "reading the lease timings of the topology")
			var renewals []time.Time
			first := readLease(ctx, t, c, ns)
			if first == nil || first.Spec.RenewTime == nil {
				expect.Fatalf(t, "expected a renewed Lease %s/%s; saw %s", ns, release.NamespaceLockLease, describeLease(first))
			}
			renewals = append(renewals, first.Spec.RenewTime.Time)
			// Two renewals, each due within renewInterval (+ slack for a loaded machine).
			expect.Eventually(ctx, t, fmt.Sprintf("two renewals of Lease %s/%s by %s (renewInterval %s)", ns, release.NamespaceLockLease, holder, timings.RenewInterval),
				2*timings.RenewInterval+2*failoverSlack+5*time.Second, func(ctx context.Context) (bool, string, error) {
					l := readLease(ctx, t, c, ns)
					if l == nil || l.Spec.RenewTime == nil {
						return false, describeLease(l), nil
					}
					if holderOf(l) != holder {
						return false, "", fmt.Errorf("the Lease changed hands while B was running: %s", describeLease(l))
					}
					if r := l.Spec.RenewTime.Time; r.After(renewals[len(renewals)-1]) {
						renewals = append(renewals, r)
					}
					return len(renewals) >= 3, fmt.Sprintf("renewals seen: %d, last %s", len(renewals)-1, describeLease(l)), nil
				})
			gap := renewals[2].Sub(renewals[1])
			suite.Note(ctx, t, "renewIntervalSeconds", round3(gap.Seconds()))
			if gap > timings.RenewInterval+failoverSlack {
				expect.Errorf(t, "expected B to renew its Lease every %s; two renewals were %.2fs apart", timings.RenewInterval, gap.Seconds())
			}
			return ctx
		}).
		Assess("a deleted Lease is recreated by B with renewTime set at creation", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			ns := s.opB().rel.RestrictedNamespace()
			timings, err := s.topo.LeaseTimings()
			expect.NoError(t, err, "reading the lease timings of the topology")
			old := readLease(ctx, t, c, ns)
			if old == nil {
				expect.Fatalf(t, "expected Lease %s/%s; there is none", ns, release.NamespaceLockLease)
			}
			w, err := c.Kube().CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{
				FieldSelector:   fields.OneTermEqualSelector("metadata.name", release.NamespaceLockLease).String(),
				ResourceVersion: old.ResourceVersion,
			})
			expect.NoError(t, err, "watching Lease %s/%s", ns, release.NamespaceLockLease)
			defer w.Stop()
			deletedAt := time.Now()
			err = c.Kube().CoordinationV1().Leases(ns).Delete(ctx, release.NamespaceLockLease, metav1.DeleteOptions{})
			expect.NoError(t, err, "deleting Lease %s/%s", ns, release.NamespaceLockLease)
			t.Cleanup(func() { s.opB().settled(ctx, t, c) })
			timeout := time.NewTimer(timings.RenewInterval + failoverSlack + 10*time.Second)
			defer timeout.Stop()
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						expect.Fatalf(t, "the watch of Lease %s/%s ended before B recreated it", ns, release.NamespaceLockLease)
					}
					l, isLease := ev.Object.(*coordinationv1.Lease)
					if ev.Type != watch.Added || !isLease || l.UID == old.UID {
						continue
					}
					recreated := time.Since(deletedAt)
					suite.Note(ctx, t, "recreatedAfterSeconds", round3(recreated.Seconds()))
					expect.Equal(t, "holderIdentity of the recreated Lease", holder, holderOf(l))
					if l.Spec.RenewTime == nil {
						expect.Errorf(t, "expected the recreated Lease to carry renewTime from its creation on; its first version has none: %s", describeLease(l))
					}
					if recreated > timings.RenewInterval+failoverSlack {
						expect.Errorf(t, "expected B to recreate its deleted Lease within renewInterval %s (+2s); it took %.2fs", timings.RenewInterval, recreated.Seconds())
					}
					return ctx
				case <-timeout.C:
					expect.Fatalf(t, "expected B to recreate its deleted Lease %s/%s within renewInterval %s; it did not within %.1fs",
						ns, release.NamespaceLockLease, timings.RenewInterval, time.Since(deletedAt).Seconds())
				}
			}
		}).
		Assess("no other namespace has a lock Lease", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			for _, ns := range append([]string{s.opA().rel.Namespace}, s.topo.Tenants...) {
				_, err := c.Kube().CoordinationV1().Leases(ns).Get(ctx, release.NamespaceLockLease, metav1.GetOptions{})
				if !apierrors.IsNotFound(err) {
					expect.Errorf(t, "expected no Lease %s/%s (no restricted operator there); got %v", ns, release.NamespaceLockLease, err)
				}
			}
			return ctx
		}).
		Feature()
}

// configurations is M3: both operators' webhook configurations exist side by side under their
// documented names, B's selecting only its namespace.
func (s *scenarios) configurations() types.Feature {
	return features.New("both webhook configurations coexist; the restricted one selects only its namespace").
		WithLabel(suite.LabelScenario, "M3").
		Assess("names, Services and namespaceSelectors of both operators' configurations", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			a, b := s.opA(), s.opB()
			nss, err := c.Kube().CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			expect.NoError(t, err, "listing Namespaces")
			var all []string
			for _, ns := range nss.Items {
				all = append(all, ns.Name)
			}
			restricted := b.rel.RestrictedNamespace()
			expect.Equal(t, "validating configuration name of "+a.String(), a.rel.Name+"-validating", a.rel.ValidatingName())
			expect.Equal(t, "validating configuration name of "+b.String(), b.rel.Name+"-validating-"+restricted, b.rel.ValidatingName())
			for _, want := range []struct {
				op       operator
				selected []string // nil: every namespace
			}{{a, nil}, {b.operator, []string{restricted}}} {
				r := want.op.rel
				vwc, err := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, r.ValidatingName(), metav1.GetOptions{})
				expect.NoError(t, err, "getting ValidatingWebhookConfiguration %s of %s", r.ValidatingName(), want.op)
				mwc, err := c.Kube().AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, r.MutatingName(), metav1.GetOptions{})
				expect.NoError(t, err, "getting MutatingWebhookConfiguration %s of %s", r.MutatingName(), want.op)
				type hook struct {
					where    string
					client   admissionregistrationv1.WebhookClientConfig
					selector *metav1.LabelSelector
				}
				var hooks []hook
				for _, w := range vwc.Webhooks {
					hooks = append(hooks, hook{"ValidatingWebhookConfiguration " + vwc.Name + " webhook " + w.Name, w.ClientConfig, w.NamespaceSelector})
				}
				for _, w := range mwc.Webhooks {
					hooks = append(hooks, hook{"MutatingWebhookConfiguration " + mwc.Name + " webhook " + w.Name, w.ClientConfig, w.NamespaceSelector})
				}
				wantSelected := want.selected
				if wantSelected == nil {
					wantSelected = all
				}
				for _, h := range hooks {
					svc := h.client.Service
					if svc == nil || svc.Namespace != r.Namespace || svc.Name != r.ServiceName() {
						expect.Errorf(t, "expected %s to call Service %s/%s; it calls %+v", h.where, r.Namespace, r.ServiceName(), svc)
					}
					if len(h.client.CABundle) == 0 {
						expect.Errorf(t, "expected a caBundle on %s", h.where)
					}
					sel, err := metav1.LabelSelectorAsSelector(h.selector)
					expect.NoError(t, err, "parsing the namespaceSelector of %s", h.where)
					var selected []string
					for _, ns := range nss.Items {
						if sel.Matches(labels.Set(ns.Labels)) {
							selected = append(selected, ns.Name)
						}
					}
					expect.Equal(t, "namespaces selected by "+h.where, wantSelected, selected)
				}
			}
			return ctx
		}).
		Feature()
}
