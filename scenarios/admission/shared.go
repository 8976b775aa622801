package admission

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/suite"
)

// executorAnnotation selects vLLM's distributed executor backend; only mp and ray exist.
const executorAnnotation = "nvidia.com/vllm-distributed-executor-backend"

// componentCase is a component spec fragment and what the shared rules make of it.
type componentCase struct {
	id  string         // part of the object's name
	set map[string]any // fields of the component (DCD spec, or one DGD service)
	// cause is the denial's cause with %[1]s standing for the component's path ("spec" or
	// "spec.services[frontend]"); empty when the fragment is admitted.
	cause string
}

// brokenComponents break one shared rule each.
var brokenComponents = []componentCase{
	{"negative-replicas", map[string]any{"replicas": int64(-1)},
		"%[1]s.replicas: Invalid value: -1: must be greater than or equal to 0"},
	{"ingress-without-host", map[string]any{"ingress": map[string]any{"enabled": true}},
		"%[1]s.ingress.host: Required value: required when ingress is enabled"},
	{"mount-without-mountpoint", map[string]any{"volumeMounts": []any{map[string]any{"name": "models"}}},
		"%[1]s.volumeMounts[0].mountPoint: Required value: required unless useAsCompilationCache is true"},
	{"shm-without-size", map[string]any{"sharedMemory": map[string]any{"disabled": false}},
		"%[1]s.sharedMemory.size: Required value: required unless sharedMemory.disabled is true"},
	{"executor-thread", map[string]any{"annotations": map[string]any{executorAnnotation: "thread"}},
		`%[1]s.annotations[` + executorAnnotation + `]: Unsupported value: "thread": supported values: "mp", "ray"`},
}

// allowedComponents sit on the allowed side of each rule's boundary.
var allowedComponents = []componentCase{
	{id: "zero-replicas", set: map[string]any{"replicas": int64(0)}},
	{id: "ingress-with-host", set: map[string]any{"ingress": map[string]any{"enabled": true, "host": "llm.example.com"}}},
	{id: "ingress-disabled", set: map[string]any{"ingress": map[string]any{"enabled": false}}},
	{id: "compilation-cache", set: map[string]any{"volumeMounts": []any{map[string]any{"name": "cache", "useAsCompilationCache": true}}}},
	{id: "mountpoint", set: map[string]any{"volumeMounts": []any{map[string]any{"name": "models", "mountPoint": "/models"}}}},
	{id: "shm-disabled", set: map[string]any{"sharedMemory": map[string]any{"disabled": true}}},
	{id: "shm-size", set: map[string]any{"sharedMemory": map[string]any{"size": "8Gi"}}},
	{id: "executor-mp", set: map[string]any{"annotations": map[string]any{executorAnnotation: "mp"}}},
	{id: "executor-ray", set: map[string]any{"annotations": map[string]any{executorAnnotation: "ray"}}},
}

// deprecatedFields are admitted, each with its own warning (%[1]s: the component's path).
var deprecatedFields = map[string]any{
	"dynamoNamespace": "legacy-namespace",
	"autoscaling":     map[string]any{"enabled": true, "minReplicas": int64(1), "maxReplicas": int64(3)},
}

var deprecationWarnings = []string{
	"%[1]s.dynamoNamespace is deprecated and ignored: the Dynamo namespace is derived from the graph",
	"%[1]s.autoscaling is deprecated: scale the component with an external autoscaler instead",
}

// sharedRules is A1: the rules a DynamoComponentDeployment and every service of a
// DynamoGraphDeployment share, seen from both kinds — denials naming the field, admitted
// objects stored as written, and warnings (not denials) for deprecated fields.
func sharedRules() e2etypes.Feature {
	var ns string
	return features.New("DynamoComponentDeployment and DynamoGraphDeployment services share the component rules; deprecated fields warn").
		WithLabel(suite.LabelScenario, "A1").
		Setup(suite.NamespaceSetup(&ns, "a1")).
		Assess("a DynamoComponentDeployment breaking a rule is denied, naming the field", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			for _, tc := range brokenComponents {
				name := "dcd-" + tc.id
				_, err := componentDeployments.tryCreate(ctx, dyn, componentDeployments.object(ns, name, merged(componentSpec(), tc.set)))
				expectDenied(t, "creating DynamoComponentDeployment "+ref(ns, name), err,
					componentDeployments.denial(ns, name, fmt.Sprintf(tc.cause, "spec")))
			}
			return ctx
		}).
		Assess("a DynamoGraphDeployment whose service breaks a rule is denied, naming the service's field", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			for _, tc := range brokenComponents {
				name := "dgd-" + tc.id
				obj := graphDeployments.object(ns, name, graphSpec(map[string]any{"frontend": merged(map[string]any{"replicas": int64(1)}, tc.set)}))
				_, err := graphDeployments.tryCreate(ctx, dyn, obj)
				expectDenied(t, "creating DynamoGraphDeployment "+ref(ns, name), err,
					graphDeployments.denial(ns, name, fmt.Sprintf(tc.cause, "spec.services[frontend]")))
			}
			return ctx
		}).
		Assess("the rules hold on update too", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			componentDeployments.mustCreate(ctx, t, dyn, componentDeployments.object(ns, "dcd-scaled", componentSpec()))
			_, err := componentDeployments.tryPatch(ctx, dyn, ns, "dcd-scaled", map[string]any{"spec": map[string]any{"replicas": -1}})
			expectDenied(t, "patching spec.replicas of DynamoComponentDeployment "+ref(ns, "dcd-scaled")+" to -1", err,
				componentDeployments.denial(ns, "dcd-scaled", "spec.replicas: Invalid value: -1: must be greater than or equal to 0"))
			return ctx
		}).
		Assess("what the rules allow is admitted and stored as written, for both kinds", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			for _, tc := range allowedComponents {
				dcd := componentDeployments.object(ns, "dcd-"+tc.id, merged(componentSpec(), tc.set))
				what := "DynamoComponentDeployment " + ref(ns, dcd.GetName())
				if got, err := componentDeployments.tryCreate(ctx, dyn, dcd); expectAdmitted(t, "creating "+what, err) {
					expectStored(t, "spec of "+what, nestedMap(got, "spec"), tc.set)
				}
				dgd := graphDeployments.object(ns, "dgd-"+tc.id, graphSpec(map[string]any{"frontend": merged(map[string]any{"replicas": int64(1)}, tc.set)}))
				what = "DynamoGraphDeployment " + ref(ns, dgd.GetName())
				if got, err := graphDeployments.tryCreate(ctx, dyn, dgd); expectAdmitted(t, "creating "+what, err) {
					expectStored(t, "spec.services[frontend] of "+what, nestedMap(got, "spec", "services", "frontend"), tc.set)
				}
			}
			return ctx
		}).
		Assess("deprecated dynamoNamespace and autoscaling are admitted with one warning each, on create and on update", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			dcd := componentDeployments.object(ns, "dcd-deprecated", merged(componentSpec(), deprecatedFields))
			expectWarned(ctx, t, c, componentDeployments, dcd, "spec", "spec")
			dgd := graphDeployments.object(ns, "dgd-deprecated", graphSpec(map[string]any{"frontend": merged(map[string]any{"replicas": int64(1)}, deprecatedFields)}))
			expectWarned(ctx, t, c, graphDeployments, dgd, "spec.services[frontend]", "spec", "services", "frontend")
			return ctx
		}).
		Feature()
}

// expectWarned creates obj, expecting it admitted with exactly the deprecation warnings for
// its component (at fieldPath, as messages spell it; at path in the object) and stored with
// the deprecated fields, then labels it and expects the same warnings for that update.
func expectWarned(ctx context.Context, t *testing.T, c *suite.Cluster, k kind, obj *unstructured.Unstructured, fieldPath string, path ...string) {
	t.Helper()
	want := make([]string, len(deprecationWarnings))
	for i, w := range deprecationWarnings {
		want[i] = fmt.Sprintf(w, fieldPath)
	}
	slices.Sort(want)
	what := k.name + " " + ref(obj.GetNamespace(), obj.GetName())

	var stored *unstructured.Unstructured
	warnings, err := withWarnings(t, c, func(dyn dynamic.Interface) (err error) {
		stored, err = k.tryCreate(ctx, dyn, obj)
		return err
	})
	if !expectAdmitted(t, "creating "+what+" with deprecated fields", err) {
		return
	}
	slices.Sort(warnings)
	expect.Equal(t, "warnings returned for creating "+what, want, warnings)
	expectStored(t, fieldPath+" of "+what, nestedMap(stored, path...), deprecatedFields)

	warnings, err = withWarnings(t, c, func(dyn dynamic.Interface) error {
		_, err := k.tryPatch(ctx, dyn, obj.GetNamespace(), obj.GetName(), map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "a"}}})
		return err
	})
	if !expectAdmitted(t, "labelling "+what, err) {
		return
	}
	slices.Sort(warnings)
	expect.Equal(t, "warnings returned for labelling "+what, want, warnings)
}
