package validation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// Model validates DynamoModels (A5): modelName and baseModelName are required, a LoRA
// adapter needs an s3:// or hf:// source, and modelType and baseModelName never change.
func Model() admission.Validator[*v1alpha1.DynamoModel] {
	return rules[*v1alpha1.DynamoModel]{
		gk:     v1alpha1.GroupVersion.WithKind("DynamoModel").GroupKind(),
		create: validateModel,
		update: func(oldObj, newObj *v1alpha1.DynamoModel) (field.ErrorList, admission.Warnings) {
			errs, warnings := validateModel(newObj)
			spec := field.NewPath("spec")
			errs = append(errs, immutableField(spec.Child("modelType"), newObj.Spec.ModelType, oldObj.Spec.ModelType)...)
			errs = append(errs, immutableField(spec.Child("baseModelName"), newObj.Spec.BaseModelName, oldObj.Spec.BaseModelName)...)
			return errs, warnings
		},
	}
}

func validateModel(m *v1alpha1.DynamoModel) (field.ErrorList, admission.Warnings) {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if m.Spec.ModelName == "" {
		errs = append(errs, field.Required(spec.Child("modelName"), ""))
	}
	if m.Spec.BaseModelName == "" {
		errs = append(errs, field.Required(spec.Child("baseModelName"), ""))
	}
	if m.Spec.ModelType == v1alpha1.ModelTypeLoRA {
		uriPath := spec.Child("source", "uri")
		switch uri := sourceURI(m); {
		case uri == "":
			errs = append(errs, field.Required(uriPath, "required for lora models"))
		case !hasAnyPrefix(uri, v1alpha1.LoRASourceSchemes):
			errs = append(errs, field.Invalid(uriPath, uri,
				fmt.Sprintf("a lora model's source must start with %s", strings.Join(v1alpha1.LoRASourceSchemes, " or "))))
		}
	}
	return errs, nil
}

func sourceURI(m *v1alpha1.DynamoModel) string {
	if m.Spec.Source == nil {
		return ""
	}
	return m.Spec.Source.URI
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
