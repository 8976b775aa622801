package admission

import (
	"context"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// componentUpdate is A4: a DynamoComponentDeployment keeps its backendFramework. The CRD's CEL
// rule answers (schema validation runs before the webhook is asked); other changes pass.
func componentUpdate() e2etypes.Feature {
	var ns string
	const name = "decode"
	return features.New("DynamoComponentDeployment update: backendFramework is immutable").
		WithLabel(suite.LabelScenario, "A4").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = suite.Namespace(ctx, t, "a4")
			componentDeployments.mustCreate(ctx, t, suite.ClusterFrom(ctx, t).Dynamic(), componentDeployments.object(ns, name, componentSpec()))
			return ctx
		}).
		Assess(boundariesStep, assessBoundaries(&ns, "A4")).
		Assess("other changes are admitted and stored; backendFramework stays vllm", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			got, err := componentDeployments.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"replicas": int64(4), "image": "registry.example.com/vllm:1"}})
			if expectAdmitted(t, "scaling DynamoComponentDeployment "+ref(ns, name), err) {
				expectStored(t, "spec of DynamoComponentDeployment "+ref(ns, name), nestedMap(got, "spec"),
					map[string]any{"backendFramework": "vllm", "replicas": int64(4), "image": "registry.example.com/vllm:1"})
			}
			return ctx
		}).
		Feature()
}

// componentDeploymentBoundaries are the rules of A4.
func componentDeploymentBoundaries() []boundary {
	return []boundary{backendFrameworkFixed("A4", componentDeployments, componentSpec(), "trtllm")}
}
