package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// userImage is a profiler image a user chose; the mutating webhook must leave it alone.
const userImage = "registry.example.com/team/profiler:1.2.3"

// mutatingDefaults is A7: the mutating webhooks stamp the operator version on new
// DynamoGraphDeployments and default the DynamoGraphDeploymentRequest image — only where the
// user set nothing, and idempotently (applying twice equals applying once; running the webhook
// on its own output changes nothing).
func mutatingDefaults() e2etypes.Feature {
	var ns string
	return features.New("mutating webhooks stamp the operator version and default the DGDR image, idempotently").
		WithLabel(suite.LabelScenario, "A7").
		Setup(suite.NamespaceSetup(&ns, "a7")).
		Assess("a DynamoGraphDeployment created without the annotation gets the operator's version", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			got := create(ctx, t, c, dynamo.GraphDeployments, dynamo.GraphDeployment(ns, "stamped"))
			expect.Equal(t, "annotation "+dynamo.OriginVersionAnnotation+" of DynamoGraphDeployment "+ns+"/stamped",
				c.OperatorVersion(), got.GetAnnotations()[dynamo.OriginVersionAnnotation])
			return ctx
		}).
		Assess("an origin version the user set is kept", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			obj := dynamo.GraphDeployment(ns, "preset")
			obj.SetAnnotations(map[string]string{dynamo.OriginVersionAnnotation: "v0.0.1-user"})
			got := create(ctx, t, c, dynamo.GraphDeployments, obj)
			expect.Equal(t, "annotation "+dynamo.OriginVersionAnnotation+" of DynamoGraphDeployment "+ns+"/preset",
				"v0.0.1-user", got.GetAnnotations()[dynamo.OriginVersionAnnotation])
			return ctx
		}).
		Assess("applying the same DynamoGraphDeployment again changes nothing (kubectl apply, client- and server-side)", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			manifest := dynamo.GraphDeployment(ns, "applied")
			create(ctx, t, c, dynamo.GraphDeployments, manifest)
			settled := waitSettled(ctx, t, c, ns, "applied")
			again := reapply(ctx, t, c, dynamo.GraphDeployments, manifest)
			expect.Equal(t, "annotation "+dynamo.OriginVersionAnnotation+" after applying the manifest again",
				c.OperatorVersion(), again.GetAnnotations()[dynamo.OriginVersionAnnotation])
			expect.Equal(t, "resourceVersion of DynamoGraphDeployment "+ns+"/applied after applying the same manifest again (a change means something was rewritten)",
				settled.GetResourceVersion(), again.GetResourceVersion())

			first := serverSideApply(ctx, t, c, dynamo.GraphDeployments, manifest)
			second := serverSideApply(ctx, t, c, dynamo.GraphDeployments, manifest)
			expect.Equal(t, "annotation "+dynamo.OriginVersionAnnotation+" after two server-side applies",
				c.OperatorVersion(), second.GetAnnotations()[dynamo.OriginVersionAnnotation])
			expect.Equal(t, "resourceVersion of DynamoGraphDeployment "+ns+"/applied after the second identical server-side apply",
				first.GetResourceVersion(), second.GetResourceVersion())
			return ctx
		}).
		Assess("a DynamoGraphDeploymentRequest without an image gets the default image", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			got := create(ctx, t, c, dynamo.GraphDeploymentRequests, dynamo.GraphDeploymentRequest(ns, "defaulted"))
			expect.Equal(t, "spec.image of DynamoGraphDeploymentRequest "+ns+"/defaulted",
				r.DefaultDGDRImage(c.OperatorVersion()), nestedString(got, "spec", "image"))
			return ctx
		})).
		Assess("an image the user set is kept, on create and on update", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			obj := dynamo.GraphDeploymentRequest(ns, "chosen")
			expect.NoError(t, unstructured.SetNestedField(obj.Object, userImage, "spec", "image"), "setting spec.image")
			got := create(ctx, t, c, dynamo.GraphDeploymentRequests, obj)
			expect.Equal(t, "spec.image of DynamoGraphDeploymentRequest "+ns+"/chosen after create", userImage, nestedString(got, "spec", "image"))
			updated, err := c.Dynamic().Resource(dynamo.GraphDeploymentRequests).Namespace(ns).Patch(ctx, "chosen", types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"team":"a"}}}`), metav1.PatchOptions{})
			expect.NoError(t, err, "labelling DynamoGraphDeploymentRequest %s/chosen", ns)
			expect.Equal(t, "spec.image of DynamoGraphDeploymentRequest "+ns+"/chosen after an update", userImage, nestedString(updated, "spec", "image"))
			return ctx
		}).
		Assess("the webhooks applied to their own output change nothing (reinvocation is safe)", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			dgd := dynamo.GraphDeployment(ns, "reinvoked")
			dgd.SetAnnotations(map[string]string{dynamo.OriginVersionAnnotation: c.OperatorVersion()})
			out := dryRunCreate(ctx, t, c, dynamo.GraphDeployments, dgd)
			expect.Equal(t, "annotations of a dry-run DynamoGraphDeployment that already carries the webhook's output",
				dgd.GetAnnotations(), out.GetAnnotations())
			dgdr := dynamo.GraphDeploymentRequest(ns, "reinvoked")
			expect.NoError(t, unstructured.SetNestedField(dgdr.Object, r.DefaultDGDRImage(c.OperatorVersion()), "spec", "image"), "setting spec.image")
			outR := dryRunCreate(ctx, t, c, dynamo.GraphDeploymentRequests, dgdr)
			expect.Equal(t, "spec.image of a dry-run DynamoGraphDeploymentRequest that already carries the webhook's output",
				nestedString(dgdr, "spec", "image"), nestedString(outR, "spec", "image"))
			return ctx
		})).
		Feature()
}

func create(ctx context.Context, t *testing.T, c *suite.Cluster, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := c.Dynamic().Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
	expect.NoError(t, err, "creating %s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
	return got
}

func dryRunCreate(ctx context.Context, t *testing.T, c *suite.Cluster, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := c.Dynamic().Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	expect.NoError(t, err, "dry-run creating %s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
	return got
}

// reapply sends the manifest again the way `kubectl apply` does for an object it created: a
// merge patch with the manifest's content.
func reapply(ctx context.Context, t *testing.T, c *suite.Cluster, gvr schema.GroupVersionResource, manifest *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	patch, err := json.Marshal(manifest.Object)
	expect.NoError(t, err, "encoding the manifest")
	got, err := c.Dynamic().Resource(gvr).Namespace(manifest.GetNamespace()).Patch(ctx, manifest.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	expect.NoError(t, err, "applying %s %s/%s again", manifest.GetKind(), manifest.GetNamespace(), manifest.GetName())
	return got
}

// waitSettled waits until the operator has reconciled a new DynamoGraphDeployment (finalizer
// added, status.observedGeneration current) and returns it; only then does a resourceVersion
// say something about what a re-apply changed.
func waitSettled(ctx context.Context, t *testing.T, c *suite.Cluster, ns, name string) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	expect.Eventually(ctx, t, "the operator to reconcile DynamoGraphDeployment "+ns+"/"+name+" (finalizer, status.observedGeneration)", time.Minute,
		func(ctx context.Context) (bool, string, error) {
			obj, err := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
			got = obj
			return len(obj.GetFinalizers()) > 0 && observed == obj.GetGeneration(),
				fmt.Sprintf("finalizers %v, generation %d, status.observedGeneration %d", obj.GetFinalizers(), obj.GetGeneration(), observed), nil
		})
	return got
}

// serverSideApply is `kubectl apply --server-side` of the manifest.
func serverSideApply(ctx context.Context, t *testing.T, c *suite.Cluster, gvr schema.GroupVersionResource, manifest *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := c.Dynamic().Resource(gvr).Namespace(manifest.GetNamespace()).Apply(ctx, manifest.GetName(), manifest, metav1.ApplyOptions{FieldManager: "gauntlet-a7", Force: true})
	expect.NoError(t, err, "server-side applying %s %s/%s", manifest.GetKind(), manifest.GetNamespace(), manifest.GetName())
	return got
}

func nestedString(obj *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(obj.Object, path...)
	return s
}
