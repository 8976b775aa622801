// Package validation holds the admission rules of the operator's validating webhooks, one
// admission.Validator per kind (CATALOG.md A1–A6, A9, A10). Validators are pure rules:
// namespace exclusion, logging and metrics are decorators composed by package webhook.
package validation

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// CauseTypeFieldValueImmutable is the StatusCause type of a denial cause that changes an
// immutable field. apimachinery reports those as FieldValueInvalid (told apart only by the
// error's Origin, which a Status does not carry); a distinct cause type lets API clients and
// the denial metrics tell "immutable" from "invalid".
const CauseTypeFieldValueImmutable metav1.CauseType = "FieldValueImmutable"

// originImmutable is the field.Error Origin apimachinery itself uses for immutable fields
// (k8s.io/apimachinery/pkg/api/validate).
const originImmutable = "immutable"

// immutable reports a changed immutable field; detail says what may not change and why.
func immutable(path *field.Path, value any, detail string) *field.Error {
	return field.Invalid(path, value, detail).WithOrigin(originImmutable)
}

// immutableField reports a change of the immutable field at path, naming the old value
// ("field is immutable (was "vllm")"); nothing when the value is unchanged.
func immutableField[T ~string](path *field.Path, newValue, oldValue T) field.ErrorList {
	if newValue == oldValue {
		return nil
	}
	return field.ErrorList{immutable(path, newValue,
		fmt.Sprintf("%s (was %q)", apimachineryvalidation.FieldImmutableErrorMsg, oldValue))}
}

// rules adapts per-kind rule functions to admission.Validator and owns what every kind
// shares: updates of objects being deleted are never blocked (A10), and denials are
// *apierrors.StatusError values naming kind, namespace/name and field path (A9).
type rules[T client.Object] struct {
	gk schema.GroupKind
	// create returns the causes for denying obj and any warnings.
	create func(obj T) (field.ErrorList, admission.Warnings)
	// update returns the causes for denying the change from oldObj to newObj.
	update func(oldObj, newObj T) (field.ErrorList, admission.Warnings)
}

func (r rules[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	errs, warnings := r.create(obj)
	return warnings, r.invalid(ctx, obj, errs)
}

func (r rules[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	// A finalizer must always be removable, or an object whose spec no longer passes today's
	// rules would be stuck Terminating (A10).
	if newObj.GetDeletionTimestamp() != nil {
		return nil, nil
	}
	errs, warnings := r.update(oldObj, newObj)
	return warnings, r.invalid(ctx, newObj, errs)
}

// ValidateDelete admits every deletion: no rule depends on an object's absence.
func (r rules[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}

func (r rules[T]) invalid(ctx context.Context, obj T, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	ns, name := objectKey(ctx, obj)
	return Invalid(r.gk, ns, name, errs)
}

// Invalid builds the denial for obj's field errors: a StatusError with reason Invalid whose
// message reads "<Kind> <namespace>/<name> is invalid: <path>: <problem>; …" and whose
// Details.Causes carry each field path and cause type.
func Invalid(gk schema.GroupKind, namespace, name string, errs field.ErrorList) *apierrors.StatusError {
	causes := make([]metav1.StatusCause, 0, len(errs))
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		causes = append(causes, metav1.StatusCause{Type: causeType(e), Message: e.ErrorBody(), Field: e.Field})
		msgs = append(msgs, e.Error())
	}
	ref := name
	if namespace != "" {
		ref = namespace + "/" + name
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnprocessableEntity,
		Reason:  metav1.StatusReasonInvalid,
		Message: fmt.Sprintf("%s %s is invalid: %s", gk.Kind, ref, strings.Join(msgs, "; ")),
		Details: &metav1.StatusDetails{Group: gk.Group, Kind: gk.Kind, Name: name, Causes: causes},
	}}
}

func causeType(e *field.Error) metav1.CauseType {
	if e.Origin == originImmutable {
		return CauseTypeFieldValueImmutable
	}
	return metav1.CauseType(e.Type)
}

// objectKey names obj for messages. The request's namespace stands in when the object omits
// it, and generateName when the apiserver has not chosen a name yet.
func objectKey(ctx context.Context, obj client.Object) (namespace, name string) {
	namespace, name = obj.GetNamespace(), obj.GetName()
	if req, err := admission.RequestFromContext(ctx); err == nil {
		if namespace == "" {
			namespace = req.Namespace
		}
		if name == "" {
			name = req.Name
		}
	}
	if name == "" && obj.GetGenerateName() != "" {
		name = obj.GetGenerateName() + "*"
	}
	return namespace, name
}
