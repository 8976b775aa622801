package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// maxGraphAndServiceName bounds len(graph name) + len(service name): the operator derives
// resource names (DNS labels) from both.
const maxGraphAndServiceName = 45

// twoServices are the services most A2 cases use.
func twoServices() map[string]any {
	return map[string]any{"frontend": map[string]any{"replicas": int64(1)}, "decode": map[string]any{"replicas": int64(2)}}
}

func withRestart(restart map[string]any) map[string]any {
	return merged(graphSpec(twoServices()), map[string]any{"restart": restart})
}

func withPVCs(pvcs ...any) map[string]any {
	return merged(graphSpec(twoServices()), map[string]any{"pvcs": pvcs})
}

// shapedGraph is the graph A3 changes: service frontend single-node, decode multinode.
func shapedGraph() map[string]any {
	return graphSpec(map[string]any{
		"frontend": map[string]any{"replicas": int64(1)},
		"decode":   map[string]any{"replicas": int64(1), "multinode": map[string]any{"nodeCount": int64(2)}},
	})
}

// graphCreate is A2: the rules for creating a DynamoGraphDeployment — services, PVCs, restart
// and name length (graphBoundaries) — each denied with the field and reason, and its closest
// allowed values admitted and stored as written.
func graphCreate() e2etypes.Feature {
	var ns string
	return features.New("DynamoGraphDeployment create: services, PVCs, restart and name length").
		WithLabel(suite.LabelScenario, "A2").
		Setup(suite.NamespaceSetup(&ns, "a2")).
		Assess(boundariesStep, assessBoundaries(&ns, "A2")).
		Feature()
}

// graphUpdate is A3: what may not change on a DynamoGraphDeployment (graphBoundaries).
// backendFramework is guarded by the CRD's CEL rule (it answers before the webhook is asked);
// the set of services and each service's single-node or multinode shape by the validating
// webhook, which lists added and removed services sorted. Other changes are admitted and stored.
func graphUpdate() e2etypes.Feature {
	var ns string
	const name = "graph"
	return features.New("DynamoGraphDeployment update: backendFramework, the set of services and their node shape are fixed").
		WithLabel(suite.LabelScenario, "A3").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = suite.Namespace(ctx, t, "a3")
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			graphDeployments.mustCreate(ctx, t, dyn, graphDeployments.object(ns, name, shapedGraph()))
			return ctx
		}).
		Assess(boundariesStep, assessBoundaries(&ns, "A3")).
		Assess("other changes (replicas, node count) are admitted and stored", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			change := map[string]any{
				"frontend": map[string]any{"replicas": int64(3)},
				"decode":   map[string]any{"multinode": map[string]any{"nodeCount": int64(4)}},
			}
			got, err := graphDeployments.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"services": change}})
			if !expectAdmitted(t, "scaling DynamoGraphDeployment "+ref(ns, name), err) {
				return ctx
			}
			what := "DynamoGraphDeployment " + ref(ns, name)
			expectStored(t, "spec.services[frontend] of "+what, nestedMap(got, "spec", "services", "frontend"), map[string]any{"replicas": int64(3)})
			expectStored(t, "spec.services[decode] of "+what, nestedMap(got, "spec", "services", "decode"), map[string]any{"replicas": int64(1), "multinode": map[string]any{"nodeCount": int64(4)}})
			if services := nestedMap(got, "spec", "services"); len(services) != 2 {
				expect.Errorf(t, "services of %s after scaling: expected frontend and decode, saw %v", what, services)
			}
			return ctx
		}).
		Feature()
}

// graphBoundaries are the rules of A2 (creates) and A3 (updates).
func graphBoundaries() []boundary {
	const createdPVC = "required when create is true"
	const order = "spec.restart.strategy.order"
	restart := func(strategyType string, serviceOrder ...any) map[string]any {
		strategy := map[string]any{"type": strategyType}
		if serviceOrder != nil {
			strategy["order"] = serviceOrder
		}
		return withRestart(map[string]any{"id": "r1", "strategy": strategy})
	}
	createdPVCWithout := func(field string) map[string]any {
		pvc := map[string]any{"name": "models", "create": true, "storageClass": "standard", "size": "100Gi", "volumeAccessMode": "ReadWriteMany"}
		delete(pvc, field)
		return withPVCs(pvc)
	}
	pvcRequired := func(field string) boundary {
		return boundary{scenario: "A2", id: "pvc-" + strings.ToLower(field), rule: "pvcs[]." + field + " required when create=true", kind: graphDeployments,
			refused:  []probe{{spec: createdPVCWithout(field), causes: []string{"spec.pvcs[0]." + field + ": Required value: " + createdPVC}}},
			admitted: []probe{{spec: createdPVCWithout("")}, {spec: withPVCs(map[string]any{"name": "models", "create": false})}}}
	}
	// A name that leaves exactly maxGraphAndServiceName characters for "frontend", and one
	// character more.
	fits := "graph-" + strings.Repeat("x", maxGraphAndServiceName-len("graph-")-len("frontend"))
	tooLong := fits + "y"
	oneService := graphSpec(map[string]any{"frontend": map[string]any{"replicas": int64(1)}})
	shaped := shapedGraph()
	service := map[string]any{"replicas": int64(1)}
	return []boundary{
		{scenario: "A2", id: "services", rule: "at least one service", kind: graphDeployments,
			refused: []probe{
				{spec: map[string]any{"backendFramework": "vllm"}, causes: []string{"spec.services: Required value: at least one service is required"}},
				{spec: graphSpec(map[string]any{}), causes: []string{"spec.services: Required value: at least one service is required"}},
			},
			admitted: []probe{{spec: oneService}}},
		{scenario: "A2", id: "pvc-name", rule: "pvcs[].name required", kind: graphDeployments,
			refused:  []probe{{spec: withPVCs(map[string]any{"create": false}), causes: []string{"spec.pvcs[0].name: Required value"}}},
			admitted: []probe{{spec: withPVCs(map[string]any{"name": "models", "create": false})}}},
		pvcRequired("storageClass"),
		pvcRequired("size"),
		pvcRequired("volumeAccessMode"),
		{scenario: "A2", id: "restart-id", rule: "restart.id required", kind: graphDeployments,
			refused:  []probe{{spec: withRestart(map[string]any{"strategy": map[string]any{"type": "Sequential"}}), causes: []string{"spec.restart.id: Required value"}}},
			admitted: []probe{{spec: restart("Sequential")}}},
		{scenario: "A2", id: "restart-type", rule: "restart.strategy.type ∈ {Sequential, Parallel} (schema)", kind: graphDeployments, judge: byOpenAPI,
			refused:  []probe{{spec: restart("Rolling"), causes: []string{`spec.restart.strategy.type: Unsupported value: "Rolling": supported values: "Sequential", "Parallel"`}}},
			admitted: []probe{{spec: restart("Sequential")}, {spec: restart("Parallel")}}},
		{scenario: "A2", id: "restart-parallel", rule: "restart.strategy.order forbidden with Parallel", kind: graphDeployments,
			refused:  []probe{{spec: restart("Parallel", "frontend", "decode"), causes: []string{order + ": Forbidden: may not be set when the restart strategy type is Parallel"}}},
			admitted: []probe{{spec: restart("Parallel")}, {spec: restart("Sequential", "frontend", "decode")}}},
		{scenario: "A2", id: "restart-unique", rule: "restart.strategy.order lists each service once", kind: graphDeployments,
			refused: []probe{{spec: restart("Sequential", "frontend", "frontend"),
				causes: []string{order + `[1]: Duplicate value: "frontend"`, order + ": Required value: must list every service exactly once; missing: decode"}}},
			admitted: []probe{{spec: restart("Sequential", "frontend", "decode")}}},
		{scenario: "A2", id: "restart-known", rule: "restart.strategy.order names only services", kind: graphDeployments,
			refused:  []probe{{spec: restart("Sequential", "decode", "frontend", "prefill"), causes: []string{order + `[2]: Unsupported value: "prefill": supported values: "decode", "frontend"`}}},
			admitted: []probe{{spec: restart("Sequential", "decode", "frontend")}}},
		{scenario: "A2", id: "restart-complete", rule: "restart.strategy.order covers every service", kind: graphDeployments,
			refused:  []probe{{spec: restart("Sequential", "frontend"), causes: []string{order + ": Required value: must list every service exactly once; missing: decode"}}},
			admitted: []probe{{spec: restart("Sequential", "decode", "frontend")}}},
		{scenario: "A2", id: "name-length", rule: fmt.Sprintf("graph name + service name ≤ %d characters", maxGraphAndServiceName), kind: graphDeployments,
			refused: []probe{{name: tooLong, spec: oneService,
				causes: []string{fmt.Sprintf("spec.services[frontend]: Too long: graph name and service name together may not be more than %d characters (%q + \"frontend\" = %d): resources derived from them must stay valid DNS labels",
					maxGraphAndServiceName, tooLong, maxGraphAndServiceName+1)}}},
			admitted: []probe{{name: fits, spec: oneService}}},

		backendFrameworkFixed("A3", graphDeployments, shaped, "sglang"),
		{scenario: "A3", id: "services-added", rule: "services cannot be added", kind: graphDeployments, base: shaped,
			refused: []probe{
				{spec: map[string]any{"services": map[string]any{"prefill": service, "planner": service}},
					causes: []string{"spec.services: Forbidden: services cannot be added after creation; added: planner, prefill"}},
				{spec: map[string]any{"services": map[string]any{"frontend": nil, "router": service}},
					causes: []string{"spec.services: Forbidden: services cannot be added after creation; added: router",
						"spec.services: Forbidden: services cannot be removed after creation; removed: frontend"}},
			},
			admitted: []probe{{spec: map[string]any{"services": map[string]any{"frontend": map[string]any{"replicas": int64(2)}}}}}},
		{scenario: "A3", id: "services-removed", rule: "services cannot be removed", kind: graphDeployments, base: shaped,
			refused: []probe{{spec: map[string]any{"services": map[string]any{"frontend": nil}},
				causes: []string{"spec.services: Forbidden: services cannot be removed after creation; removed: frontend"}}},
			admitted: []probe{{spec: map[string]any{"services": map[string]any{"frontend": map[string]any{"replicas": int64(0)}}}}}},
		{scenario: "A3", id: "node-shape", rule: "a service's single-node or multinode shape is immutable", kind: graphDeployments, base: shaped,
			refused: []probe{
				{spec: map[string]any{"services": map[string]any{"frontend": map[string]any{"multinode": map[string]any{"nodeCount": int64(2)}}}},
					causes: []string{`spec.services[frontend].multinode: Invalid value: "multinode": field is immutable: a service cannot switch between single-node and multinode (was single-node)`}},
				{spec: map[string]any{"services": map[string]any{"decode": map[string]any{"multinode": nil}}},
					causes: []string{`spec.services[decode].multinode: Invalid value: "single-node": field is immutable: a service cannot switch between single-node and multinode (was multinode)`}},
			},
			admitted: []probe{{spec: map[string]any{"services": map[string]any{"decode": map[string]any{"multinode": map[string]any{"nodeCount": int64(3)}}}}}}},
	}
}
