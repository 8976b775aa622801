package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// ComponentDeployment validates DynamoComponentDeployments: the shared component rules (A1)
// on create and update, and an immutable backendFramework (A4).
func ComponentDeployment() admission.Validator[*v1alpha1.DynamoComponentDeployment] {
	return rules[*v1alpha1.DynamoComponentDeployment]{
		gk:     v1alpha1.GroupVersion.WithKind("DynamoComponentDeployment").GroupKind(),
		create: validateComponentDeployment,
		update: func(oldObj, newObj *v1alpha1.DynamoComponentDeployment) (field.ErrorList, admission.Warnings) {
			errs, warnings := validateComponentDeployment(newObj)
			errs = append(errs, immutableBackendFramework(newObj.Spec.BackendFramework, oldObj.Spec.BackendFramework)...)
			return errs, warnings
		},
	}
}

func validateComponentDeployment(dcd *v1alpha1.DynamoComponentDeployment) (field.ErrorList, admission.Warnings) {
	return validateComponent(&dcd.Spec.DynamoComponentDeploymentSharedSpec, field.NewPath("spec"))
}

// immutableBackendFramework is shared by DCD (A4) and DGD (A3): a running component cannot
// switch inference engines in place.
func immutableBackendFramework(newValue, oldValue string) field.ErrorList {
	return immutableField(field.NewPath("spec", "backendFramework"), newValue, oldValue)
}
