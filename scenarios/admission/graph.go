package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/suite"
)

// maxGraphAndServiceName bounds len(graph name) + len(service name): the operator derives
// resource names (DNS labels) from both.
const maxGraphAndServiceName = 45

// graphCase is a DynamoGraphDeployment spec and, when it is denied, the causes of the denial.
type graphCase struct {
	name   string
	spec   map[string]any
	causes []string // empty: admitted
}

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

// graphCreateCases are the A2 rules, each with the boundary on both sides.
func graphCreateCases() []graphCase {
	const createdPVC = "required when create is true"
	const order = "spec.restart.strategy.order"
	// A name that leaves exactly maxGraphAndServiceName characters for "frontend", and one
	// character more.
	fits := "graph-" + strings.Repeat("x", maxGraphAndServiceName-len("graph-")-len("frontend"))
	tooLong := fits + "y"
	return []graphCase{
		{"no-services", map[string]any{"backendFramework": "vllm"},
			[]string{"spec.services: Required value: at least one service is required"}},
		{"empty-services", graphSpec(map[string]any{}),
			[]string{"spec.services: Required value: at least one service is required"}},
		{"pvc-without-name", withPVCs(map[string]any{"create": false}),
			[]string{"spec.pvcs[0].name: Required value"}},
		{"pvc-create-incomplete", withPVCs(map[string]any{"name": "models", "create": true}),
			[]string{
				"spec.pvcs[0].storageClass: Required value: " + createdPVC,
				"spec.pvcs[0].size: Required value: " + createdPVC,
				"spec.pvcs[0].volumeAccessMode: Required value: " + createdPVC,
			}},
		{"pvc-existing", withPVCs(map[string]any{"name": "models"}), nil},
		{"pvc-created", withPVCs(map[string]any{"name": "models", "create": true, "storageClass": "standard", "size": "100Gi", "volumeAccessMode": "ReadWriteMany"}), nil},
		{"restart-without-id", withRestart(map[string]any{"strategy": map[string]any{"type": "Sequential"}}),
			[]string{"spec.restart.id: Required value"}},
		{"restart-parallel-order", withRestart(map[string]any{"id": "r1", "strategy": map[string]any{"type": "Parallel", "order": []any{"frontend", "decode"}}}),
			[]string{order + ": Forbidden: may not be set when the restart strategy type is Parallel"}},
		{"restart-duplicate", withRestart(map[string]any{"id": "r1", "strategy": map[string]any{"type": "Sequential", "order": []any{"frontend", "frontend"}}}),
			[]string{order + `[1]: Duplicate value: "frontend"`, order + ": Required value: must list every service exactly once; missing: decode"}},
		{"restart-unknown", withRestart(map[string]any{"id": "r1", "strategy": map[string]any{"type": "Sequential", "order": []any{"decode", "frontend", "prefill"}}}),
			[]string{order + `[2]: Unsupported value: "prefill": supported values: "decode", "frontend"`}},
		{"restart-incomplete", withRestart(map[string]any{"id": "r1", "strategy": map[string]any{"type": "Sequential", "order": []any{"frontend"}}}),
			[]string{order + ": Required value: must list every service exactly once; missing: decode"}},
		{"restart-sequential", withRestart(map[string]any{"id": "r1", "strategy": map[string]any{"type": "Sequential", "order": []any{"decode", "frontend"}}}), nil},
		{"restart-parallel", withRestart(map[string]any{"id": "r1", "strategy": map[string]any{"type": "Parallel"}}), nil},
		{tooLong, graphSpec(map[string]any{"frontend": map[string]any{"replicas": int64(1)}}),
			[]string{fmt.Sprintf("spec.services[frontend]: Too long: graph name and service name together may not be more than %d characters (%q + \"frontend\" = %d): resources derived from them must stay valid DNS labels",
				maxGraphAndServiceName, tooLong, maxGraphAndServiceName+1)}},
		{fits, graphSpec(map[string]any{"frontend": map[string]any{"replicas": int64(1)}}), nil},
	}
}

// graphCreate is A2: the rules for creating a DynamoGraphDeployment — services, PVCs, restart
// and name length — each denied with the field and reason, and its allowed side admitted and
// stored as written.
func graphCreate() e2etypes.Feature {
	var ns string
	return features.New("DynamoGraphDeployment create: services, PVCs, restart and name length").
		WithLabel(suite.LabelScenario, "A2").
		Setup(suite.NamespaceSetup(&ns, "a2")).
		Assess("graphs breaking a rule are denied with every cause; graphs at the boundary are admitted as written", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			for _, tc := range graphCreateCases() {
				what := "DynamoGraphDeployment " + ref(ns, tc.name)
				got, err := graphDeployments.tryCreate(ctx, dyn, graphDeployments.object(ns, tc.name, tc.spec))
				if len(tc.causes) > 0 {
					expectDenied(t, "creating "+what, err, graphDeployments.denial(ns, tc.name, tc.causes...))
					continue
				}
				if expectAdmitted(t, "creating "+what, err) {
					expectStored(t, "spec of "+what, nestedMap(got, "spec"), tc.spec)
				}
			}
			return ctx
		}).
		Feature()
}

// graphUpdate is A3: what may not change on a DynamoGraphDeployment. backendFramework is
// guarded by the CRD's CEL rule (it answers before the webhook is asked); the set of services
// and each service's single-node or multinode shape by the validating webhook, which lists
// added and removed services sorted. Other changes are admitted.
func graphUpdate() e2etypes.Feature {
	var ns string
	const name = "graph"
	return features.New("DynamoGraphDeployment update: backendFramework, the set of services and their node shape are fixed").
		WithLabel(suite.LabelScenario, "A3").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = suite.Namespace(ctx, t, "a3")
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			graphDeployments.mustCreate(ctx, t, dyn, graphDeployments.object(ns, name, graphSpec(map[string]any{
				"frontend": map[string]any{"replicas": int64(1)},
				"decode":   map[string]any{"replicas": int64(1), "multinode": map[string]any{"nodeCount": int64(2)}},
			})))
			return ctx
		}).
		Assess("changing or removing backendFramework is rejected by the CRD's rule", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			expectBackendFrameworkFixed(ctx, t, graphDeployments, ns, name, "sglang")
			return ctx
		}).
		Assess("adding or removing services is denied, listing them sorted", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			service := map[string]any{"replicas": int64(1)}
			_, err := graphDeployments.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"services": map[string]any{"prefill": service, "planner": service}}})
			expectDenied(t, "adding services prefill and planner to DynamoGraphDeployment "+ref(ns, name), err,
				graphDeployments.denial(ns, name, "spec.services: Forbidden: services cannot be added after creation; added: planner, prefill"))
			_, err = graphDeployments.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"services": map[string]any{"frontend": nil}}})
			expectDenied(t, "removing service frontend from DynamoGraphDeployment "+ref(ns, name), err,
				graphDeployments.denial(ns, name, "spec.services: Forbidden: services cannot be removed after creation; removed: frontend"))
			_, err = graphDeployments.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"services": map[string]any{"frontend": nil, "router": service}}})
			expectDenied(t, "renaming service frontend to router in DynamoGraphDeployment "+ref(ns, name), err,
				graphDeployments.denial(ns, name,
					"spec.services: Forbidden: services cannot be added after creation; added: router",
					"spec.services: Forbidden: services cannot be removed after creation; removed: frontend"))
			return ctx
		}).
		Assess("a service cannot switch between single-node and multinode", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			_, err := graphDeployments.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"services": map[string]any{"frontend": map[string]any{"multinode": map[string]any{"nodeCount": int64(2)}}}}})
			expectDenied(t, "making service frontend of DynamoGraphDeployment "+ref(ns, name)+" multinode", err,
				graphDeployments.denial(ns, name, `spec.services[frontend].multinode: Invalid value: "multinode": field is immutable: a service cannot switch between single-node and multinode (was single-node)`))
			_, err = graphDeployments.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"services": map[string]any{"decode": map[string]any{"multinode": nil}}}})
			expectDenied(t, "making service decode of DynamoGraphDeployment "+ref(ns, name)+" single-node", err,
				graphDeployments.denial(ns, name, `spec.services[decode].multinode: Invalid value: "single-node": field is immutable: a service cannot switch between single-node and multinode (was multinode)`))
			return ctx
		}).
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
