package admission

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// thoroughAuto is the webhook's cause for a thorough search with backend auto.
const thoroughAuto = `spec.backend: Invalid value: "auto": a thorough search measures one backend on real hardware: name sglang, trtllm or vllm, or use searchStrategy rapid`

// lockedSpec is the CRD's CEL message for a spec change in a locked phase. The rule sits on the
// object's root, which the API server names <nil>.
const lockedSpec = "spec is immutable while the request is Profiling, Deploying or Deployed"

// lockedPhases are the phases in which a request's spec is frozen.
var lockedPhases = []string{"Profiling", "Deploying", "Deployed"}

func requestSpec(backend, searchStrategy string) map[string]any {
	return map[string]any{"model": "meta-llama/Llama-3-8B", "backend": backend, "searchStrategy": searchStrategy, "image": userImage}
}

// requestRules is A6 (requestBoundaries): a DynamoGraphDeploymentRequest may not ask for a
// thorough search with backend auto (on create or update), names a known backend and search
// strategy (the CRD's schema, in v1beta1 and v1alpha1), and its spec is frozen while it is
// Profiling, Deploying or Deployed — the CRD's CEL rule answers that, before the webhook is
// asked — but not its metadata, and not while Pending or Failed.
func requestRules() e2etypes.Feature {
	var ns string
	return features.New("DynamoGraphDeploymentRequest: thorough search needs a backend; spec locked while Profiling, Deploying or Deployed").
		WithLabel(suite.LabelScenario, "A6").
		Setup(suite.NamespaceSetup(&ns, "a6")).
		Assess(boundariesStep, assessBoundaries(&ns, "A6")).
		Assess("while Profiling, Deploying or Deployed the metadata can change", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			for _, phase := range lockedPhases {
				name := "locked-" + strings.ToLower(phase)
				requests.mustCreate(ctx, t, dyn, requests.object(ns, name, requestSpec("vllm", "rapid")))
				requests.patchStatus(ctx, t, dyn, ns, name, map[string]any{"phase": phase})
				_, err := requests.tryPatch(ctx, dyn, ns, name, map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "a"}}})
				expectAdmitted(t, "labelling DynamoGraphDeploymentRequest "+ref(ns, name)+" while "+phase, err)
			}
			return ctx
		}).
		Assess("while Pending or Failed the spec can change", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			for _, phase := range []string{"Pending", "Failed"} {
				name := "open-" + strings.ToLower(phase)
				requests.mustCreate(ctx, t, dyn, requests.object(ns, name, requestSpec("vllm", "rapid")))
				requests.patchStatus(ctx, t, dyn, ns, name, map[string]any{"phase": phase})
				got, err := requests.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"model": "meta-llama/Llama-3-70B"}})
				if expectAdmitted(t, "changing spec.model of DynamoGraphDeploymentRequest "+ref(ns, name)+" while "+phase, err) {
					expectStored(t, "spec of DynamoGraphDeploymentRequest "+ref(ns, name), nestedMap(got, "spec"),
						merged(requestSpec("vllm", "rapid"), map[string]any{"model": "meta-llama/Llama-3-70B"}))
				}
			}
			return ctx
		}).
		Feature()
}

// requestBoundaries are the rules of A6.
func requestBoundaries() []boundary {
	backends := []string{"auto", "sglang", "trtllm", "vllm"}
	const unsupportedBackend = `Unsupported value: "tensorrt": supported values: "auto", "sglang", "trtllm", "vllm"`
	var v1beta1Backends, v1alpha1Backends []probe
	for _, b := range backends {
		v1beta1Backends = append(v1beta1Backends, probe{spec: requestSpec(b, "rapid")})
		v1alpha1Backends = append(v1alpha1Backends, probe{spec: map[string]any{"model": "meta-llama/Llama-3-8B", "backend": b}})
	}
	var locked []probe
	for _, phase := range lockedPhases {
		locked = append(locked, probe{spec: map[string]any{"model": "meta-llama/Llama-3-70B"}, phase: phase, causes: []string{"<nil>: Invalid value: " + lockedSpec}})
	}
	return []boundary{
		{scenario: "A6", id: "thorough-auto", rule: "searchStrategy thorough needs a backend", kind: requests,
			refused:  []probe{{spec: requestSpec("auto", "thorough"), causes: []string{thoroughAuto}}},
			admitted: []probe{{spec: requestSpec("vllm", "thorough")}, {spec: requestSpec("auto", "rapid")}}},
		{scenario: "A6", id: "thorough-auto-update", rule: "searchStrategy thorough needs a backend, on update", kind: requests, base: requestSpec("vllm", "thorough"),
			refused:  []probe{{spec: map[string]any{"backend": "auto"}, causes: []string{thoroughAuto}}},
			admitted: []probe{{spec: map[string]any{"backend": "sglang"}}}},
		{scenario: "A6", id: "backend", rule: "backend ∈ {auto, sglang, trtllm, vllm} (schema, v1beta1)", kind: requests, judge: byOpenAPI,
			refused:  []probe{{spec: requestSpec("tensorrt", "rapid"), causes: []string{"spec.backend: " + unsupportedBackend}}},
			admitted: v1beta1Backends},
		{scenario: "A6", id: "backend-v1alpha1", rule: "backend ∈ {auto, sglang, trtllm, vllm} (schema, v1alpha1)", kind: requestsV1alpha1, judge: byOpenAPI,
			refused:  []probe{{spec: map[string]any{"model": "meta-llama/Llama-3-8B", "backend": "tensorrt"}, causes: []string{"spec.backend: " + unsupportedBackend}}},
			admitted: v1alpha1Backends},
		{scenario: "A6", id: "search-strategy", rule: "searchStrategy ∈ {rapid, thorough} (schema)", kind: requests, judge: byOpenAPI,
			refused:  []probe{{spec: requestSpec("vllm", "exhaustive"), causes: []string{`spec.searchStrategy: Unsupported value: "exhaustive": supported values: "rapid", "thorough"`}}},
			admitted: []probe{{spec: requestSpec("vllm", "rapid")}, {spec: requestSpec("vllm", "thorough")}}},
		{scenario: "A6", id: "spec-locked", rule: "spec locked while Profiling, Deploying or Deployed (CEL)", kind: requests, judge: byCEL, base: requestSpec("vllm", "rapid"),
			refused: locked,
			admitted: []probe{
				{spec: map[string]any{"model": "meta-llama/Llama-3-8B"}, phase: "Profiling"},
				{spec: map[string]any{"model": "meta-llama/Llama-3-70B"}, phase: "Pending"},
			}},
	}
}
