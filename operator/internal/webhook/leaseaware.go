package webhook

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// LeaseAwareValidator skips next (no checks, object admitted) for objects in namespaces that
// exclusions reports as owned by a namespace-restricted operator: that operator validates
// them, and two operators must never both judge the same object. A nil exclusions returns
// next unchanged.
func LeaseAwareValidator[T client.Object](exclusions ExclusionChecker, log logr.Logger, next admission.Validator[T]) admission.Validator[T] {
	if exclusions == nil {
		return next
	}
	return leaseAwareValidator[T]{leaseAware: leaseAware{exclusions: exclusions, log: log}, next: next}
}

// LeaseAwarePatcher is LeaseAwareValidator for patchers: in an excluded namespace the object
// is not mutated either (no patch).
func LeaseAwarePatcher[T client.Object](exclusions ExclusionChecker, log logr.Logger, next Patcher[T]) Patcher[T] {
	if exclusions == nil {
		return next
	}
	return leaseAwarePatcher[T]{leaseAware: leaseAware{exclusions: exclusions, log: log}, next: next}
}

type leaseAware struct {
	exclusions ExclusionChecker
	log        logr.Logger
}

// skip reports whether obj's namespace is excluded, and if so logs it and tells Observed.
func (l leaseAware) skip(ctx context.Context, obj client.Object) bool {
	ns := namespaceOf(ctx, obj)
	if ns == "" || !l.exclusions.Excluded(ns) {
		return false
	}
	reason := fmt.Sprintf("a namespace-restricted operator's Lease is active in namespace %s", ns)
	kind := ""
	if req, err := admission.RequestFromContext(ctx); err == nil {
		kind = req.Kind.Kind
	}
	l.log.Info("Skipping admission: a namespace-restricted operator's Lease is active in this namespace",
		"kind", kind, "namespace", ns, "name", obj.GetName())
	markSkipped(ctx, reason)
	return true
}

type leaseAwareValidator[T client.Object] struct {
	leaseAware
	next admission.Validator[T]
}

func (l leaseAwareValidator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	if l.skip(ctx, obj) {
		return nil, nil
	}
	return l.next.ValidateCreate(ctx, obj)
}

func (l leaseAwareValidator[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	if l.skip(ctx, newObj) {
		return nil, nil
	}
	return l.next.ValidateUpdate(ctx, oldObj, newObj)
}

func (l leaseAwareValidator[T]) ValidateDelete(ctx context.Context, obj T) (admission.Warnings, error) {
	if l.skip(ctx, obj) {
		return nil, nil
	}
	return l.next.ValidateDelete(ctx, obj)
}

type leaseAwarePatcher[T client.Object] struct {
	leaseAware
	next Patcher[T]
}

func (l leaseAwarePatcher[T]) Patch(ctx context.Context, obj T) ([]jsonpatch.JsonPatchOperation, error) {
	if l.skip(ctx, obj) {
		return nil, nil
	}
	return l.next.Patch(ctx, obj)
}

// namespaceOf is obj's namespace, or the request's when the object leaves it out (a create
// whose body has no metadata.namespace).
func namespaceOf(ctx context.Context, obj client.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns
	}
	if req, err := admission.RequestFromContext(ctx); err == nil {
		return req.Namespace
	}
	return ""
}
