package admission

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/suite"
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

// requestRules is A6: a v1beta1 DynamoGraphDeploymentRequest may not ask for a thorough search
// with backend auto (on create or update), and its spec is frozen while it is Profiling,
// Deploying or Deployed — the CRD's CEL rule answers that, before the webhook is asked — but
// not while Pending or Failed.
func requestRules() e2etypes.Feature {
	var ns string
	return features.New("DynamoGraphDeploymentRequest: thorough search needs a backend; spec locked while Profiling, Deploying or Deployed").
		WithLabel(suite.LabelScenario, "A6").
		Setup(suite.NamespaceSetup(&ns, "a6")).
		Assess("a thorough search with backend auto is denied; thorough with a backend and rapid with auto are admitted", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			_, err := requests.tryCreate(ctx, dyn, requests.object(ns, "thorough-auto", requestSpec("auto", "thorough")))
			expectDenied(t, "creating DynamoGraphDeploymentRequest "+ref(ns, "thorough-auto"), err, requests.denial(ns, "thorough-auto", thoroughAuto))
			for name, spec := range map[string]map[string]any{"thorough-vllm": requestSpec("vllm", "thorough"), "rapid-auto": requestSpec("auto", "rapid")} {
				got, err := requests.tryCreate(ctx, dyn, requests.object(ns, name, spec))
				if expectAdmitted(t, "creating DynamoGraphDeploymentRequest "+ref(ns, name), err) {
					expectStored(t, "spec of DynamoGraphDeploymentRequest "+ref(ns, name), nestedMap(got, "spec"), spec)
				}
			}
			_, err = requests.tryPatch(ctx, dyn, ns, "thorough-vllm", map[string]any{"spec": map[string]any{"backend": "auto"}})
			expectDenied(t, "changing the backend of DynamoGraphDeploymentRequest "+ref(ns, "thorough-vllm")+" to auto", err, requests.denial(ns, "thorough-vllm", thoroughAuto))
			return ctx
		}).
		Assess("while Profiling, Deploying or Deployed the spec cannot change, metadata can", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			for _, phase := range lockedPhases {
				name := "locked-" + strings.ToLower(phase)
				requests.mustCreate(ctx, t, dyn, requests.object(ns, name, requestSpec("vllm", "rapid")))
				requests.patchStatus(ctx, t, dyn, ns, name, map[string]any{"phase": phase})
				_, err := requests.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"model": "meta-llama/Llama-3-70B"}})
				expectDenied(t, "changing spec.model of DynamoGraphDeploymentRequest "+ref(ns, name)+" while "+phase, err, requests.celDenial(name, "<nil>", lockedSpec))
				_, err = requests.tryPatch(ctx, dyn, ns, name, map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "a"}}})
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
