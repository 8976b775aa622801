package validation

import (
	"fmt"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// validateComponent checks the fields a DynamoComponentDeployment and every service of a
// DynamoGraphDeployment share (A1); path is where spec sits in the object.
func validateComponent(spec *v1alpha1.DynamoComponentDeploymentSharedSpec, path *field.Path) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	var warnings admission.Warnings

	if spec.Replicas != nil {
		errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(int64(*spec.Replicas), path.Child("replicas"))...)
	}
	if ing := spec.Ingress; ing != nil && ing.Enabled && ing.Host == "" {
		errs = append(errs, field.Required(path.Child("ingress", "host"), "required when ingress is enabled"))
	}
	for i, vm := range spec.VolumeMounts {
		if vm.MountPoint == "" && !vm.UseAsCompilationCache {
			errs = append(errs, field.Required(path.Child("volumeMounts").Index(i).Child("mountPoint"),
				"required unless useAsCompilationCache is true"))
		}
	}
	if shm := spec.SharedMemory; shm != nil && !shm.Disabled && shm.Size == nil {
		errs = append(errs, field.Required(path.Child("sharedMemory", "size"), "required unless sharedMemory.disabled is true"))
	}
	if backend, ok := spec.Annotations[v1alpha1.VLLMDistributedExecutorBackendAnnotation]; ok {
		if !contains(v1alpha1.VLLMDistributedExecutorBackends, backend) {
			errs = append(errs, field.NotSupported(path.Child("annotations").Key(v1alpha1.VLLMDistributedExecutorBackendAnnotation),
				backend, v1alpha1.VLLMDistributedExecutorBackends))
		}
	}

	if spec.DynamoNamespace != nil {
		warnings = append(warnings, fmt.Sprintf("%s is deprecated and ignored: the Dynamo namespace is derived from the graph",
			path.Child("dynamoNamespace")))
	}
	if spec.Autoscaling != nil {
		warnings = append(warnings, fmt.Sprintf("%s is deprecated: scale the component with an external autoscaler instead",
			path.Child("autoscaling")))
	}
	return errs, warnings
}

func contains(values []string, v string) bool {
	for _, s := range values {
		if s == v {
			return true
		}
	}
	return false
}
