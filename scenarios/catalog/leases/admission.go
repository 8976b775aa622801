package leases

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// verdict is what one operator is expected to have done with a request: its log line's
// result, or absent (the API server never called it).
type verdict struct {
	op     operator
	result string // "" = no line at all
}

// expectVerdicts waits until each operator's log shows exactly the expected `msg` lines for
// object ns/name, and each webhook counter moved by exactly the expected amount since before.
func expectVerdicts(ctx context.Context, t *testing.T, c *suite.Cluster, msg, webhook, ns, name string, before map[string]operatorMetrics, want ...verdict) {
	t.Helper()
	for _, w := range want {
		what := fmt.Sprintf("%s to log %q for %s/%s", w.op, msg, ns, name)
		if w.result == "" {
			what = fmt.Sprintf("%s to log no %q line for %s/%s (its webhooks are not called there)", w.op, msg, ns, name)
		} else {
			what += " with result=" + w.result
		}
		expect.Eventually(ctx, t, what, observeTimeout, func(ctx context.Context) (bool, string, error) {
			entries, err := w.op.readLogs(ctx, c)
			if err != nil {
				return false, err.Error(), nil
			}
			got := admissionsOf(entries, msg, ns, name)
			if w.result == "" {
				if len(got) > 0 {
					return false, "", fmt.Errorf("%s logged %v", w.op, got)
				}
				return true, "", nil
			}
			if len(got) == 0 {
				return false, "no such line", nil
			}
			if len(got) != 1 || got[0].Result != w.result {
				return false, "", fmt.Errorf("expected exactly one line with result=%s; %s logged results %v", w.result, w.op, results(got))
			}
			if w.result == resultSkipped && !slices.ContainsFunc(entries, func(e logEntry) bool {
				return e.Msg == msgSkip && e.Namespace == ns && e.Name == name
			}) {
				return false, fmt.Sprintf("result=skipped but no %q line", msgSkip), nil
			}
			return true, "", nil
		})
		// The counters: +1 under the expected result, +0 under every other one.
		expect.Eventually(ctx, t, fmt.Sprintf("%s's counters of webhook %s to show the request", w.op, webhook), observeTimeout, func(ctx context.Context) (bool, string, error) {
			now, err := w.op.scrape(ctx, c)
			if err != nil {
				return false, err.Error(), nil
			}
			ok := true
			for _, r := range []string{resultAllowed, resultDenied, resultSkipped} {
				delta := now.creates(webhook, r) - before[w.op.role].creates(webhook, r)
				want := 0.0
				if r == w.result {
					want = 1
				}
				if delta != want {
					ok = false
				}
			}
			return ok, fmt.Sprintf("before: %s; now: %s", before[w.op.role].requestCounts(webhook), now.requestCounts(webhook)), nil
		})
	}
}

// scrapeBoth reads both operators' counters before a request.
func (s *scenarios) scrapeBoth(ctx context.Context, t *testing.T, c *suite.Cluster) map[string]operatorMetrics {
	t.Helper()
	out := map[string]operatorMetrics{}
	for _, op := range []operator{s.opA(), s.opB().operator} {
		m, err := op.scrape(ctx, c)
		expect.NoError(t, err, "scraping %s", op)
		out[op.role] = m
	}
	return out
}

// whoValidates is M2: in team-a B denies and A skips; in team-b A denies and B is not asked.
func (s *scenarios) whoValidates() types.Feature {
	deny := func(ctx context.Context, t *testing.T, c *suite.Cluster, ns, name string) {
		t.Helper()
		_, err := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, dynamo.InvalidGraphDeployment(ns, name),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		want := dynamo.DeniedBy(dynamo.GraphDeploymentValidatingWebhook)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "spec.services") {
			expect.Fatalf(t, "expected the invalid DynamoGraphDeployment %s/%s denied with %q naming spec.services; got %v", ns, name, want, err)
		}
	}
	return features.New("an invalid object in the restricted namespace is denied by the restricted operator and skipped by the cluster-wide one").
		WithLabel(suite.LabelScenario, "M2").
		Setup(s.settledStep).
		Assess("team-a: denied by B, skipped by A (log lines and counters)", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			ns := s.opB().rel.RestrictedNamespace()
			before := s.scrapeBoth(ctx, t, c)
			name := "m2-invalid-" + rand.String(5)
			deny(ctx, t, c, ns, name)
			expectVerdicts(ctx, t, c, msgValidateCreate, webhookValidateDGD, ns, name, before,
				verdict{s.opB().operator, resultDenied}, verdict{s.opA(), resultSkipped})
			return ctx
		}).
		Assess("team-b: denied by A, B not asked", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			ns := s.topo.Tenants[0]
			before := s.scrapeBoth(ctx, t, c)
			name := "m2-invalid-" + rand.String(5)
			deny(ctx, t, c, ns, name)
			expectVerdicts(ctx, t, c, msgValidateCreate, webhookValidateDGD, ns, name, before,
				verdict{s.opA(), resultDenied}, verdict{s.opB().operator, ""})
			return ctx
		}).
		Feature()
}

// mutationSkipped is M7: A's mutating webhooks step back in team-a as its validating ones do.
// A's configuration sorts before B's, so the API server calls A first: had A mutated, its own
// default DGDR image would be the one users see.
func (s *scenarios) mutationSkipped() types.Feature {
	create := func(ctx context.Context, t *testing.T, c *suite.Cluster, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		got, err := c.Dynamic().Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		expect.NoError(t, err, "creating %s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
		return got
	}
	image := func(o *unstructured.Unstructured) string {
		v, _, _ := unstructured.NestedString(o.Object, "spec", "image")
		return v
	}
	return features.New("the cluster-wide operator's mutating webhooks also skip the restricted namespace").
		WithLabel(suite.LabelScenario, "M7").
		Setup(s.settledStep).
		Assess("a DynamoGraphDeployment created (dry run) in team-a is stamped by B; A skips it", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			ns := s.opB().rel.RestrictedNamespace()
			name := "m7-stamped-" + rand.String(5)
			before := s.scrapeBoth(ctx, t, c)
			// A dry run: a stored object would be updated by B's controller, and the update
			// would call the mutating webhooks again.
			got := create(ctx, t, c, dynamo.GraphDeployments, dynamo.GraphDeployment(ns, name))
			expect.Equal(t, "annotation "+dynamo.OriginVersionAnnotation+" of DynamoGraphDeployment "+ns+"/"+name,
				c.OperatorVersion(), got.GetAnnotations()[dynamo.OriginVersionAnnotation])
			expectVerdicts(ctx, t, c, msgDefault, webhookMutateDGD, ns, name, before,
				verdict{s.opB().operator, resultAllowed}, verdict{s.opA(), resultSkipped})
			return ctx
		}).
		Assess("a DynamoGraphDeploymentRequest without an image gets B's default image in team-a and A's in team-b", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			a, b := s.opA(), s.opB()
			for _, tc := range []struct {
				ns        string
				image     string
				verdicts  []verdict
				mutatedBy operator
			}{
				{b.rel.RestrictedNamespace(), b.rel.DefaultDGDRImage(c.OperatorVersion()), []verdict{{b.operator, resultAllowed}, {a, resultSkipped}}, b.operator},
				{s.topo.Tenants[0], a.rel.DefaultDGDRImage(c.OperatorVersion()), []verdict{{a, resultAllowed}, {b.operator, ""}}, a},
			} {
				name := "m7-defaulted-" + rand.String(5)
				before := s.scrapeBoth(ctx, t, c)
				got := create(ctx, t, c, dynamo.GraphDeploymentRequests, dynamo.GraphDeploymentRequest(tc.ns, name))
				expect.Equal(t, fmt.Sprintf("spec.image of DynamoGraphDeploymentRequest %s/%s (the default image of %s)", tc.ns, name, tc.mutatedBy),
					tc.image, image(got))
				expectVerdicts(ctx, t, c, msgDefault, webhookMutateDGDR, tc.ns, name, before, tc.verdicts...)
			}
			return ctx
		}).
		Feature()
}
