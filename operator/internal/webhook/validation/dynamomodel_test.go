package validation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

func model(mutate ...func(*v1alpha1.DynamoModel)) *v1alpha1.DynamoModel {
	return mutated(&v1alpha1.DynamoModel{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "llama"},
		Spec: v1alpha1.DynamoModelSpec{
			ModelName:     "llama-3-8b",
			BaseModelName: "meta-llama/Llama-3-8B",
			ModelType:     v1alpha1.ModelTypeBase,
		},
	}, mutate)
}

func lora(uri string) func(*v1alpha1.DynamoModel) {
	return func(m *v1alpha1.DynamoModel) {
		m.Spec.ModelType = v1alpha1.ModelTypeLoRA
		if uri != "" {
			m.Spec.Source = &v1alpha1.ModelSource{URI: uri}
		}
	}
}

func TestModel(t *testing.T) {
	v := Model()
	runCreates(t, v, []createCase[*v1alpha1.DynamoModel]{
		{name: "A5/valid base model", obj: model()},
		{name: "A5/base model type may be omitted", obj: model(func(m *v1alpha1.DynamoModel) { m.Spec.ModelType = "" })},
		{
			name:    "A5/modelName required",
			obj:     model(func(m *v1alpha1.DynamoModel) { m.Spec.ModelName = "" }),
			want:    []cause{{"spec.modelName", required}},
			message: "DynamoModel team-a/llama is invalid: spec.modelName: Required value",
		},
		{
			name: "A5/baseModelName required",
			obj:  model(func(m *v1alpha1.DynamoModel) { m.Spec.BaseModelName = "" }),
			want: []cause{{"spec.baseModelName", required}},
		},
		{
			name:    "A5/lora needs a source",
			obj:     model(lora("")),
			want:    []cause{{"spec.source.uri", required}},
			message: "DynamoModel team-a/llama is invalid: spec.source.uri: Required value: required for lora models",
		},
		{name: "A5/lora from s3", obj: model(lora("s3://adapters/sql"))},
		{name: "A5/lora from hugging face", obj: model(lora("hf://org/sql-adapter"))},
		{
			name: "A5/lora from another scheme",
			obj:  model(lora("https://example.com/adapter")),
			want: []cause{{"spec.source.uri", invalid}},
			message: `DynamoModel team-a/llama is invalid: spec.source.uri: Invalid value: "https://example.com/adapter": ` +
				`a lora model's source must start with s3:// or hf://`,
		},
		{
			name: "A5/scheme is a prefix, not a substring",
			obj:  model(lora("file:///s3://x")),
			want: []cause{{"spec.source.uri", invalid}},
		},
	})

	runUpdates(t, v, []updateCase[*v1alpha1.DynamoModel]{
		{
			name: "A5/modelName may change",
			old:  model(),
			new:  model(func(m *v1alpha1.DynamoModel) { m.Spec.ModelName = "llama-3-8b-instruct" }),
		},
		{
			name: "A5/modelType immutable",
			old:  model(),
			new:  model(lora("s3://adapters/sql")),
			want: []cause{{"spec.modelType", immutableCT}},
		},
		{
			name: "A5/baseModelName immutable",
			old:  model(),
			new:  model(func(m *v1alpha1.DynamoModel) { m.Spec.BaseModelName = "meta-llama/Llama-3-70B" }),
			want: []cause{{"spec.baseModelName", immutableCT}},
		},
		{
			name: "A5/required fields checked on update",
			old:  model(),
			new:  model(func(m *v1alpha1.DynamoModel) { m.Spec.ModelName = "" }),
			want: []cause{{"spec.modelName", required}},
		},
	})
}
