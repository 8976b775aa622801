package admission

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// modelRules is A5 (modelBoundaries): DynamoModel needs modelName and baseModelName, a LoRA
// adapter needs an s3:// or hf:// source, modelType is base or lora (the CRD's schema), and
// modelType and baseModelName never change (the CRD's CEL rules answer those, before the
// webhook is asked); modelName can.
func modelRules() e2etypes.Feature {
	var ns string
	const name = "llama"
	return features.New("DynamoModel: names required, LoRA sources s3:// or hf://, modelType and baseModelName immutable").
		WithLabel(suite.LabelScenario, "A5").
		Setup(suite.NamespaceSetup(&ns, "a5")).
		Assess(boundariesStep, assessBoundaries(&ns, "A5")).
		Assess("modelName can change and is stored as written", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			models.mustCreate(ctx, t, dyn, models.object(ns, name, modelSpec()))
			got, err := models.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"modelName": "llama-3-8b-instruct"}})
			if expectAdmitted(t, "renaming the served model of DynamoModel "+ref(ns, name), err) {
				expectStored(t, "spec of DynamoModel "+ref(ns, name), nestedMap(got, "spec"),
					merged(modelSpec(), map[string]any{"modelName": "llama-3-8b-instruct"}))
			}
			return ctx
		}).
		Feature()
}

// modelBoundaries are the rules of A5.
func modelBoundaries() []boundary {
	lora := func(uri string) map[string]any {
		return merged(modelSpec(), map[string]any{"modelType": "lora", "source": map[string]any{"uri": uri}})
	}
	without := func(field string) map[string]any {
		spec := modelSpec()
		delete(spec, field)
		return spec
	}
	scheme := func(uri string) string {
		return fmt.Sprintf(`spec.source.uri: Invalid value: %q: a lora model's source must start with s3:// or hf://`, uri)
	}
	return []boundary{
		{scenario: "A5", id: "model-name", rule: "modelName required", kind: models,
			refused:  []probe{{spec: without("modelName"), causes: []string{"spec.modelName: Required value"}}},
			admitted: []probe{{spec: modelSpec()}}},
		{scenario: "A5", id: "base-model-name", rule: "baseModelName required", kind: models,
			refused:  []probe{{spec: without("baseModelName"), causes: []string{"spec.baseModelName: Required value"}}},
			admitted: []probe{{spec: modelSpec()}}},
		{scenario: "A5", id: "model-type", rule: "modelType ∈ {base, lora} (schema)", kind: models, judge: byOpenAPI,
			refused:  []probe{{spec: merged(modelSpec(), map[string]any{"modelType": "adapter"}), causes: []string{`spec.modelType: Unsupported value: "adapter": supported values: "base", "lora"`}}},
			admitted: []probe{{spec: modelSpec()}, {spec: lora("s3://x")}}},
		{scenario: "A5", id: "lora-source", rule: "lora needs source.uri", kind: models,
			refused:  []probe{{spec: merged(modelSpec(), map[string]any{"modelType": "lora"}), causes: []string{"spec.source.uri: Required value: required for lora models"}}},
			admitted: []probe{{spec: lora("s3://x")}}},
		{scenario: "A5", id: "lora-scheme", rule: "lora source.uri starts with s3:// or hf://", kind: models,
			refused:  []probe{{spec: lora("http://x"), causes: []string{scheme("http://x")}}},
			admitted: []probe{{spec: lora("s3://x")}, {spec: lora("hf://x")}, {spec: merged(modelSpec(), map[string]any{"source": map[string]any{"uri": "http://x"}})}}},
		{scenario: "A5", id: "lora-scheme-update", rule: "lora source.uri starts with s3:// or hf:// on update", kind: models, base: lora("s3://x"),
			refused:  []probe{{spec: map[string]any{"source": map[string]any{"uri": "http://x"}}, causes: []string{scheme("http://x")}}},
			admitted: []probe{{spec: map[string]any{"source": map[string]any{"uri": "hf://x"}}}}},
		{scenario: "A5", id: "model-type-fixed", rule: "modelType immutable (CEL)", kind: models, judge: byCEL, base: modelSpec(),
			refused:  []probe{{spec: map[string]any{"modelType": "lora", "source": map[string]any{"uri": "s3://x"}}, causes: []string{"spec: Invalid value: modelType is immutable"}}},
			admitted: []probe{{spec: map[string]any{"modelType": "base"}}}},
		{scenario: "A5", id: "base-model-fixed", rule: "baseModelName immutable (CEL)", kind: models, judge: byCEL, base: modelSpec(),
			refused:  []probe{{spec: map[string]any{"baseModelName": "meta-llama/Llama-3-70B"}, causes: []string{"spec: Invalid value: baseModelName is immutable"}}},
			admitted: []probe{{spec: map[string]any{"baseModelName": modelSpec()["baseModelName"]}}}},
	}
}
