package contract

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// probes is W3: each webhook judges the description's probes as declared — what it must admit
// is admitted, what it must deny is denied with the declared message, a mutation applied once
// is not applied again when the API server reinvokes the webhook on its own result, and a dry
// run leaves nothing behind.
func probes() e2etypes.Feature {
	var ns string
	return features.New("each webhook admits, denies and patches its probes as declared, idempotently, with no side effect on a dry run").
		WithLabel(suite.LabelScenario, "W3").
		Setup(suite.NamespaceSetup(&ns, "w3")).
		Assess("every admitted probe is admitted, every denied one denied with its message", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			for _, p := range it.Target.Probes {
				obj := object(t, it, p.Admitted)
				if s := dryRun(ctx, c, obj, ns); s.err != nil {
					expect.Errorf(t, "webhook %s: expected %s (%s) admitted, saw: %v", p.Webhook, describe(obj, ns), p.Admitted, s.err)
				}
				if p.Denied != nil {
					if seen := judgeDenial(p, dryRun(ctx, c, object(t, it, p.Denied.Object), ns)); seen != "" {
						expect.Errorf(t, "webhook %s: %s", p.Webhook, seen)
					}
				}
			}
			return ctx
		}).
		Assess("a mutating webhook patches as declared, and its result sent again comes back unchanged", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			for _, p := range it.Target.Probes {
				if p.Patch == "" {
					continue
				}
				first := dryRun(ctx, c, object(t, it, p.Admitted), ns)
				if seen := judgePatch(p, first); seen != "" {
					expect.Errorf(t, "%s", seen)
					continue
				}
				again := dryRun(ctx, c, asSent(first.got), ns)
				expect.NoError(t, again.err, "sending %s again as webhook %s patched it", p.Admitted, p.Webhook)
				if a, b := asSent(first.got).Object, asSent(again.got).Object; !reflect.DeepEqual(a, b) {
					expect.Errorf(t, "webhook %s is not idempotent: its patched %s, sent again, came back changed:\n  first  %v\n  second %v", p.Webhook, p.Admitted, a, b)
				}
			}
			return ctx
		}).
		Assess("the dry runs stored nothing", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			for _, p := range it.Target.Probes {
				obj := object(t, it, p.Admitted)
				res, err := c.ResourceOf(obj, ns)
				expect.NoError(t, err, "finding the resource of %s", p.Admitted)
				_, err = res.Get(ctx, obj.GetName(), metav1.GetOptions{})
				if !apierrors.IsNotFound(err) {
					expect.Errorf(t, "after dry runs only, expected %s not found, saw: %v", describe(obj, ns), fmt.Sprint(err))
				}
			}
			return ctx
		}).Feature()
}

func object(t *testing.T, it *target.Installed, rel string) *unstructured.Unstructured {
	t.Helper()
	obj, err := it.Target.Object(rel)
	expect.NoError(t, err, "reading probe %s of target %s", rel, it.Target.Name)
	return obj
}

// asSent is obj as a client would send it again: without what the API server fills in.
func asSent(obj *unstructured.Unstructured) *unstructured.Unstructured {
	o := obj.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"} {
		unstructured.RemoveNestedField(o.Object, "metadata", f)
	}
	delete(o.Object, "status")
	return o
}
