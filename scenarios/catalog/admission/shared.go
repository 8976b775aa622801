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

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// executorAnnotation selects vLLM's distributed executor backend; only mp and ray exist.
const executorAnnotation = "nvidia.com/vllm-distributed-executor-backend"

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
// DynamoGraphDeployment share (componentRules), seen from both kinds on both sides — denials
// naming the field, the closest admitted values stored as written — and warnings (not denials)
// for deprecated fields.
func sharedRules() e2etypes.Feature {
	var ns string
	return features.New("DynamoComponentDeployment and DynamoGraphDeployment services share the component rules; deprecated fields warn").
		WithLabel(suite.LabelScenario, "A1").
		Setup(suite.NamespaceSetup(&ns, "a1")).
		Assess(boundariesStep, assessBoundaries(&ns, "A1")).
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

// componentRule is a rule on the component spec a DynamoComponentDeployment and every service
// of a DynamoGraphDeployment share (A1): fragments of a component, and the causes with %[1]s
// standing for the component's path.
type componentRule struct {
	id, rule string
	judge    judge
	// graphMasked: the DynamoGraphDeployment side is one of maskedByDefaulter.
	graphMasked bool
	refused     map[string]any
	cause       string
	admitted    []map[string]any
}

var componentRules = []componentRule{
	{"replicas", "replicas ≥ 0", byWebhook, false, map[string]any{"replicas": int64(-1)},
		"%[1]s.replicas: Invalid value: -1: must be greater than or equal to 0",
		[]map[string]any{{"replicas": int64(0)}}},
	{"ingress-host", "ingress.host required when ingress is enabled", byWebhook, false, map[string]any{"ingress": map[string]any{"enabled": true}},
		"%[1]s.ingress.host: Required value: required when ingress is enabled",
		[]map[string]any{{"ingress": map[string]any{"enabled": true, "host": "llm.example.com"}}, {"ingress": map[string]any{"enabled": false}}}},
	{"mountpoint", "volumeMounts[].mountPoint required unless useAsCompilationCache", byWebhook, false, map[string]any{"volumeMounts": []any{map[string]any{"name": "models"}}},
		"%[1]s.volumeMounts[0].mountPoint: Required value: required unless useAsCompilationCache is true",
		[]map[string]any{{"volumeMounts": []any{map[string]any{"name": "cache", "useAsCompilationCache": true}}}, {"volumeMounts": []any{map[string]any{"name": "models", "mountPoint": "/models"}}}}},
	{"shm-size", "sharedMemory.size required unless disabled", byWebhook, false, map[string]any{"sharedMemory": map[string]any{"disabled": false}},
		"%[1]s.sharedMemory.size: Required value: required unless sharedMemory.disabled is true",
		[]map[string]any{{"sharedMemory": map[string]any{"disabled": true}}, {"sharedMemory": map[string]any{"size": "8Gi"}}}},
	{"executor", "annotation " + executorAnnotation + " ∈ {mp, ray}", byWebhook, false, map[string]any{"annotations": map[string]any{executorAnnotation: "foo"}},
		`%[1]s.annotations[` + executorAnnotation + `]: Unsupported value: "foo": supported values: "mp", "ray"`,
		[]map[string]any{{"annotations": map[string]any{executorAnnotation: "mp"}}, {"annotations": map[string]any{executorAnnotation: "ray"}}}},
	{"node-count", "multinode.nodeCount ≥ 2 (schema)", byOpenAPI, false, map[string]any{"multinode": map[string]any{"nodeCount": int64(1)}},
		"%[1]s.multinode.nodeCount: Invalid value: 1: %[1]s.multinode.nodeCount in body should be greater than or equal to 2",
		[]map[string]any{{"multinode": map[string]any{"nodeCount": int64(2)}}}},
	{"node-count-set", "multinode.nodeCount required (schema)", byOpenAPI, false, map[string]any{"multinode": map[string]any{}},
		"%[1]s.multinode.nodeCount: Required value",
		[]map[string]any{{"multinode": map[string]any{"nodeCount": int64(2)}}}},
	{"mount-name", "volumeMounts[].name required (schema)", byOpenAPI, false, map[string]any{"volumeMounts": []any{map[string]any{"mountPoint": "/models"}}},
		"%[1]s.volumeMounts[0].name: Required value",
		[]map[string]any{{"volumeMounts": []any{map[string]any{"name": "models", "mountPoint": "/models"}}}}},
	{"shm-quantity", "sharedMemory.size is a quantity (schema)", byOpenAPI, true, map[string]any{"sharedMemory": map[string]any{"size": "8 GiB"}},
		`%[1]s.sharedMemory.size: Invalid value: "8 GiB": %[1]s.sharedMemory.size in body should match '` + quantityPattern + `'`,
		[]map[string]any{{"sharedMemory": map[string]any{"size": "8Gi"}}}},
}

// componentBoundaries are the shared rules on both kinds: created as a DynamoComponentDeployment
// and as service frontend of a DynamoGraphDeployment, and replicas ≥ 0 on update too.
func componentBoundaries() []boundary {
	var out []boundary
	for _, r := range componentRules {
		dcd := boundary{scenario: "A1", id: r.id, rule: r.rule + " (DynamoComponentDeployment)", kind: componentDeployments, judge: r.judge,
			refused: []probe{{spec: merged(componentSpec(), r.refused), causes: []string{fmt.Sprintf(r.cause, "spec")}}}}
		// The webhook names a service by its key (spec.services[frontend]), the API server's
		// schema validation as a property (spec.services.frontend).
		service := "spec.services[frontend]"
		if r.judge != byWebhook {
			service = "spec.services.frontend"
		}
		dgd := boundary{scenario: "A1", id: r.id, rule: r.rule + " (DynamoGraphDeployment service)", kind: graphDeployments, judge: r.judge,
			refused: []probe{{spec: frontendWith(r.refused), causes: []string{fmt.Sprintf(r.cause, service)}}}}
		for _, a := range r.admitted {
			dcd.admitted = append(dcd.admitted, probe{spec: merged(componentSpec(), a)})
			dgd.admitted = append(dgd.admitted, probe{spec: frontendWith(a)})
		}
		out = append(out, dcd)
		if !r.graphMasked {
			out = append(out, dgd)
		}
	}
	return append(out, boundary{scenario: "A1", id: "replicas-update", rule: "replicas ≥ 0 on update (DynamoComponentDeployment)",
		kind: componentDeployments, judge: byWebhook, base: componentSpec(),
		refused:  []probe{{spec: map[string]any{"replicas": int64(-1)}, causes: []string{"spec.replicas: Invalid value: -1: must be greater than or equal to 0"}}},
		admitted: []probe{{spec: map[string]any{"replicas": int64(0)}}}})
}

// frontendWith is a graph spec whose one service, frontend, has the fields of set.
func frontendWith(set map[string]any) map[string]any {
	return graphSpec(map[string]any{"frontend": merged(map[string]any{"replicas": int64(1)}, set)})
}
