package webhook

import (
	"context"
	"errors"
	"net/http"
	"reflect"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Patcher is a mutating admission rule that states its change as JSON patch operations on the
// object as the API server sent it. A controller-runtime Defaulter changes a typed copy
// instead, which admission.WithDefaulter's handler marshals back and diffs against the
// request's object: more work than the rest of a mutating call, for a rule that knows what
// it adds.
type Patcher[T client.Object] interface {
	Patch(ctx context.Context, obj T) ([]jsonpatch.JsonPatchOperation, error)
}

// patching is the admission handler of a Patcher. It answers as admission.WithDefaulter's
// handler does — a DELETE admitted without a look at the object; an object the same decoder
// cannot decode refused with 400 and the decoder's message; a rule's error as a status or a
// denial — and answers the rule's operations as they are, without a typed copy or a diff.
type patching[T client.Object] struct {
	decoder admission.Decoder
	object  reflect.Type // what T points to
	patcher Patcher[T]
}

// newPatching serves p for objects of obj's type, decoded with scheme.
func newPatching[T client.Object](scheme *runtime.Scheme, obj T, p Patcher[T]) *patching[T] {
	return &patching[T]{decoder: admission.NewDecoder(scheme), object: reflect.TypeOf(obj).Elem(), patcher: p}
}

func (h *patching[T]) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Delete {
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true, Result: &metav1.Status{Code: http.StatusOK}}}
	}
	ctx = admission.NewContextWithRequest(ctx, req)
	obj := reflect.New(h.object).Interface().(T)
	if err := h.decoder.Decode(req, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	patch, err := h.patcher.Patch(ctx, obj)
	if err != nil {
		if status := apierrors.APIStatus(nil); errors.As(err, &status) {
			s := status.Status()
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Result: &s}}
		}
		return admission.Denied(err.Error())
	}
	return admission.Patched("", patch...)
}
