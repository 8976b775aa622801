package validation

import (
	"fmt"
	"slices"
	"strings"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// GraphDeployment validates DynamoGraphDeployments: the shared component rules for every
// service (A1) and the graph rules (A2) on create and update, plus what may not change after
// creation (A3).
func GraphDeployment() admission.Validator[*v1alpha1.DynamoGraphDeployment] {
	return rules[*v1alpha1.DynamoGraphDeployment]{
		gk:     v1alpha1.GroupVersion.WithKind("DynamoGraphDeployment").GroupKind(),
		create: validateGraphDeployment,
		update: func(oldObj, newObj *v1alpha1.DynamoGraphDeployment) (field.ErrorList, admission.Warnings) {
			errs, warnings := validateGraphDeployment(newObj)
			errs = append(errs, immutableBackendFramework(newObj.Spec.BackendFramework, oldObj.Spec.BackendFramework)...)
			errs = append(errs, validateServiceChanges(oldObj.Spec.Services, newObj.Spec.Services)...)
			return errs, warnings
		},
	}
}

func validateGraphDeployment(dgd *v1alpha1.DynamoGraphDeployment) (field.ErrorList, admission.Warnings) {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	var warnings admission.Warnings

	servicesPath := spec.Child("services")
	if len(dgd.Spec.Services) == 0 {
		errs = append(errs, field.Required(servicesPath, "at least one service is required"))
	}
	// Sorted so that the causes come out in a stable order.
	for _, name := range sortedKeys(dgd.Spec.Services) {
		path := servicesPath.Key(name)
		if total := graphNameLength(dgd) + len(name); total > v1alpha1.MaxGraphAndServiceNameLength {
			errs = append(errs, &field.Error{
				Type:     field.ErrorTypeTooLong,
				Field:    path.String(),
				BadValue: name,
				Detail: fmt.Sprintf("graph name and service name together may not be more than %d characters (%q + %q = %d): resources derived from them must stay valid DNS labels",
					v1alpha1.MaxGraphAndServiceNameLength, graphName(dgd), name, total),
			})
		}
		svc := dgd.Spec.Services[name]
		if svc == nil {
			continue
		}
		svcErrs, svcWarnings := validateComponent(svc, path)
		errs = append(errs, svcErrs...)
		warnings = append(warnings, svcWarnings...)
	}

	for i, pvc := range dgd.Spec.PVCs {
		path := spec.Child("pvcs").Index(i)
		if pvc.Name == nil || *pvc.Name == "" {
			errs = append(errs, field.Required(path.Child("name"), ""))
		}
		if pvc.Create != nil && *pvc.Create {
			const why = "required when create is true"
			if pvc.StorageClass == "" {
				errs = append(errs, field.Required(path.Child("storageClass"), why))
			}
			if pvc.Size == nil {
				errs = append(errs, field.Required(path.Child("size"), why))
			}
			if pvc.VolumeAccessMode == "" {
				errs = append(errs, field.Required(path.Child("volumeAccessMode"), why))
			}
		}
	}

	if r := dgd.Spec.Restart; r != nil {
		errs = append(errs, validateRestart(r, dgd.Spec.Services, spec.Child("restart"))...)
	}
	return errs, warnings
}

// generatedNameSuffix is the number of random characters the apiserver appends to
// metadata.generateName (k8s.io/apiserver's SimpleNameGenerator).
const generatedNameSuffix = 5

// graphName is the graph's name as users know it; for a generateName create it shows the
// random suffix the apiserver is about to add.
func graphName(dgd *v1alpha1.DynamoGraphDeployment) string {
	if dgd.Name == "" && dgd.GenerateName != "" {
		return dgd.GenerateName + strings.Repeat("x", generatedNameSuffix)
	}
	return dgd.Name
}

func graphNameLength(dgd *v1alpha1.DynamoGraphDeployment) int { return len(graphName(dgd)) }

func validateRestart(r *v1alpha1.Restart, services map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.ID == "" {
		errs = append(errs, field.Required(path.Child("id"), ""))
	}
	if r.Strategy == nil || len(r.Strategy.Order) == 0 {
		return errs
	}
	orderPath := path.Child("strategy", "order")
	if r.Strategy.Type == v1alpha1.RestartStrategyParallel {
		return append(errs, field.Forbidden(orderPath, "may not be set when the restart strategy type is Parallel"))
	}
	known := sets.KeySet(services)
	seen := sets.New[string]()
	for i, name := range r.Strategy.Order {
		switch {
		case seen.Has(name):
			errs = append(errs, field.Duplicate(orderPath.Index(i), name))
		case !known.Has(name):
			errs = append(errs, field.NotSupported(orderPath.Index(i), name, sets.List(known)))
		}
		seen.Insert(name)
	}
	if missing := sets.List(known.Difference(seen)); len(missing) > 0 {
		errs = append(errs, field.Required(orderPath,
			fmt.Sprintf("must list every service exactly once; missing: %s", strings.Join(missing, ", "))))
	}
	return errs
}

// validateServiceChanges enforces A3: the set of services and each service's single-node or
// multinode shape are fixed at creation, because the operator derives workload kinds from them.
func validateServiceChanges(oldServices, newServices map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "services")
	oldNames, newNames := sets.KeySet(oldServices), sets.KeySet(newServices)
	if added := sets.List(newNames.Difference(oldNames)); len(added) > 0 {
		errs = append(errs, field.Forbidden(path,
			fmt.Sprintf("services cannot be added after creation; added: %s", strings.Join(added, ", "))))
	}
	if removed := sets.List(oldNames.Difference(newNames)); len(removed) > 0 {
		errs = append(errs, field.Forbidden(path,
			fmt.Sprintf("services cannot be removed after creation; removed: %s", strings.Join(removed, ", "))))
	}
	for _, name := range sets.List(oldNames.Intersection(newNames)) {
		wasMultinode, isMultinode := isMultinode(oldServices[name]), isMultinode(newServices[name])
		if wasMultinode != isMultinode {
			errs = append(errs, immutable(path.Key(name).Child("multinode"), nodeShape(isMultinode),
				fmt.Sprintf("%s: a service cannot switch between single-node and multinode (was %s)",
					apimachineryvalidation.FieldImmutableErrorMsg, nodeShape(wasMultinode))))
		}
	}
	return errs
}

func isMultinode(svc *v1alpha1.DynamoComponentDeploymentSharedSpec) bool {
	return svc != nil && svc.Multinode != nil
}

func nodeShape(multinode bool) string {
	if multinode {
		return "multinode"
	}
	return "single-node"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
