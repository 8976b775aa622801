package admission

import (
	"context"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/suite"
)

// modelRules is A5: DynamoModel needs modelName and baseModelName, a LoRA adapter needs an
// s3:// or hf:// source, and modelType and baseModelName never change (the CRD's CEL rules
// answer those, before the webhook is asked).
func modelRules() e2etypes.Feature {
	var ns string
	const name = "llama"
	return features.New("DynamoModel: names required, LoRA sources s3:// or hf://, modelType and baseModelName immutable").
		WithLabel(suite.LabelScenario, "A5").
		Setup(suite.NamespaceSetup(&ns, "a5")).
		Assess("modelName and baseModelName are required", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			_, err := models.tryCreate(ctx, dyn, models.object(ns, "unnamed", map[string]any{"modelType": "base"}))
			expectDenied(t, "creating DynamoModel "+ref(ns, "unnamed")+" without names", err,
				models.denial(ns, "unnamed", "spec.modelName: Required value", "spec.baseModelName: Required value"))
			return ctx
		}).
		Assess("a LoRA adapter needs a source starting with s3:// or hf://", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			lora := func(source map[string]any) map[string]any {
				spec := merged(modelSpec(), map[string]any{"modelType": "lora"})
				if source != nil {
					spec["source"] = source
				}
				return spec
			}
			_, err := models.tryCreate(ctx, dyn, models.object(ns, "lora-unsourced", lora(nil)))
			expectDenied(t, "creating LoRA DynamoModel "+ref(ns, "lora-unsourced")+" without a source", err,
				models.denial(ns, "lora-unsourced", "spec.source.uri: Required value: required for lora models"))
			const https = "https://huggingface.co/org/adapter"
			_, err = models.tryCreate(ctx, dyn, models.object(ns, "lora-https", lora(map[string]any{"uri": https})))
			expectDenied(t, "creating LoRA DynamoModel "+ref(ns, "lora-https")+" from "+https, err,
				models.denial(ns, "lora-https", `spec.source.uri: Invalid value: "`+https+`": a lora model's source must start with s3:// or hf://`))
			for name, uri := range map[string]string{"lora-s3": "s3://adapters/llama-sql", "lora-hf": "hf://org/llama-sql"} {
				spec := lora(map[string]any{"uri": uri})
				got, err := models.tryCreate(ctx, dyn, models.object(ns, name, spec))
				if expectAdmitted(t, "creating LoRA DynamoModel "+ref(ns, name)+" from "+uri, err) {
					expectStored(t, "spec of DynamoModel "+ref(ns, name), nestedMap(got, "spec"), spec)
				}
			}
			_, err = models.tryPatch(ctx, dyn, ns, "lora-s3", map[string]any{"spec": map[string]any{"source": map[string]any{"uri": https}}})
			expectDenied(t, "changing the source of LoRA DynamoModel "+ref(ns, "lora-s3")+" to "+https, err,
				models.denial(ns, "lora-s3", `spec.source.uri: Invalid value: "`+https+`": a lora model's source must start with s3:// or hf://`))
			return ctx
		}).
		Assess("modelType and baseModelName cannot change; modelName can", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			models.mustCreate(ctx, t, dyn, models.object(ns, name, modelSpec()))
			_, err := models.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"modelType": "lora", "source": map[string]any{"uri": "s3://adapters/x"}}})
			expectDenied(t, "changing spec.modelType of DynamoModel "+ref(ns, name)+" from base to lora", err,
				models.celDenial(name, "spec", "modelType is immutable"))
			_, err = models.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"baseModelName": "meta-llama/Llama-3-70B"}})
			expectDenied(t, "changing spec.baseModelName of DynamoModel "+ref(ns, name), err,
				models.celDenial(name, "spec", "baseModelName is immutable"))
			got, err := models.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": map[string]any{"modelName": "llama-3-8b-instruct"}})
			if expectAdmitted(t, "renaming the served model of DynamoModel "+ref(ns, name), err) {
				expectStored(t, "spec of DynamoModel "+ref(ns, name), nestedMap(got, "spec"),
					merged(modelSpec(), map[string]any{"modelName": "llama-3-8b-instruct"}))
			}
			return ctx
		}).
		Feature()
}
