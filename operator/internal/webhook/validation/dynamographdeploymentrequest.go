package validation

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// GraphDeploymentRequest validates DynamoGraphDeploymentRequests in their v1beta1 hub form
// (A6); v1alpha1 requests reach it converted, through the webhook's matchPolicy Equivalent.
// A thorough search needs a concrete backend, and the spec is frozen while the request is
// Profiling, Deploying or Deployed.
func GraphDeploymentRequest() admission.Validator[*v1beta1.DynamoGraphDeploymentRequest] {
	return rules[*v1beta1.DynamoGraphDeploymentRequest]{
		gk:     v1beta1.GroupVersion.WithKind("DynamoGraphDeploymentRequest").GroupKind(),
		create: validateGraphDeploymentRequest,
		update: func(oldObj, newObj *v1beta1.DynamoGraphDeploymentRequest) (field.ErrorList, admission.Warnings) {
			errs, warnings := validateGraphDeploymentRequest(newObj)
			phase := oldObj.Status.Phase
			if slices.Contains(v1beta1.SpecLockedPhases, phase) && !equality.Semantic.DeepEqual(oldObj.Spec, newObj.Spec) {
				errs = append(errs, immutable(field.NewPath("spec"), field.OmitValueType{},
					fmt.Sprintf("%s while the request is %s (the spec is locked while Profiling, Deploying or Deployed)",
						apimachineryvalidation.FieldImmutableErrorMsg, phase)))
			}
			return errs, warnings
		},
	}
}

func validateGraphDeploymentRequest(r *v1beta1.DynamoGraphDeploymentRequest) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	if r.Spec.SearchStrategy == v1beta1.SearchStrategyThorough && r.Spec.Backend == v1beta1.BackendAuto {
		errs = append(errs, field.Invalid(field.NewPath("spec", "backend"), string(r.Spec.Backend),
			"a thorough search measures one backend on real hardware: name sglang, trtllm or vllm, or use searchStrategy rapid"))
	}
	return errs, nil
}
