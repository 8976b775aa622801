package webhook

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook/validation"
)

// Denial reasons: the values of the "reason" label of metrics.WebhookDenials, one per
// field.ErrorType of a denial's causes, with immutable-field causes told apart from other
// invalid values.
const (
	ReasonRequired     = "required"
	ReasonInvalid      = "invalid"
	ReasonImmutable    = "immutable"
	ReasonForbidden    = "forbidden"
	ReasonDuplicate    = "duplicate"
	ReasonTooLong      = "too_long"
	ReasonTooShort     = "too_short"
	ReasonTooMany      = "too_many"
	ReasonTooFew       = "too_few"
	ReasonNotSupported = "not_supported"
	ReasonNotFound     = "not_found"
	ReasonTypeInvalid  = "type_invalid"
	ReasonInternal     = "internal"
	// ReasonOther is a cause type outside this list.
	ReasonOther = "other"
	// ReasonUnspecified is a denial that names no cause.
	ReasonUnspecified = "unspecified"
)

var reasonByCauseType = map[metav1.CauseType]string{
	metav1.CauseType(field.ErrorTypeRequired):     ReasonRequired,
	metav1.CauseType(field.ErrorTypeInvalid):      ReasonInvalid,
	validation.CauseTypeFieldValueImmutable:       ReasonImmutable,
	metav1.CauseType(field.ErrorTypeForbidden):    ReasonForbidden,
	metav1.CauseType(field.ErrorTypeDuplicate):    ReasonDuplicate,
	metav1.CauseType(field.ErrorTypeTooLong):      ReasonTooLong,
	metav1.CauseType(field.ErrorTypeTooShort):     ReasonTooShort,
	metav1.CauseType(field.ErrorTypeTooMany):      ReasonTooMany,
	metav1.CauseType(field.ErrorTypeTooFew):       ReasonTooFew,
	metav1.CauseType(field.ErrorTypeNotSupported): ReasonNotSupported,
	metav1.CauseType(field.ErrorTypeNotFound):     ReasonNotFound,
	metav1.CauseType(field.ErrorTypeTypeInvalid):  ReasonTypeInvalid,
	metav1.CauseType(field.ErrorTypeInternal):     ReasonInternal,
}

// ObservedValidator logs and measures every call of next: a "validate create", "validate
// update" or "validate delete" line with kind, name, namespace and result, and the
// WebhookDuration, WebhookRequests and WebhookDenials metrics under the label webhook. It is
// meant to be the outermost decorator, so that what it records is what the apiserver got.
func ObservedValidator[T client.Object](webhook, kind string, log logr.Logger, next admission.Validator[T]) admission.Validator[T] {
	return observedValidator[T]{observer: observer{webhook: webhook, kind: kind, log: log}, next: next}
}

// ObservedPatcher is ObservedValidator for patchers, the mutating webhooks' rules: it logs
// "default" lines, with the request's operation as the metrics' operation label.
func ObservedPatcher[T client.Object](webhook, kind string, log logr.Logger, next Patcher[T]) Patcher[T] {
	return observedPatcher[T]{observer: observer{webhook: webhook, kind: kind, log: log}, next: next}
}

type observer struct {
	webhook string
	kind    string
	log     logr.Logger
}

// observe runs call and records its outcome.
func (o observer) observe(ctx context.Context, msg string, op admissionv1.Operation, obj client.Object,
	call func(context.Context) (admission.Warnings, error)) (admission.Warnings, error) {
	start := time.Now()
	ctx, skip := withSkipRecorder(ctx)
	warnings, err := call(ctx)
	elapsed := time.Since(start)

	result, reasons := classify(err, skip)
	metrics.WebhookDuration.WithLabelValues(o.webhook, string(op), result).Observe(elapsed.Seconds())
	metrics.WebhookRequests.WithLabelValues(o.webhook, string(op), result).Inc()
	for _, r := range reasons {
		metrics.WebhookDenials.WithLabelValues(o.webhook, r).Inc()
	}

	kv := []any{"kind", o.kind, "name", obj.GetName(), "namespace", namespaceOf(ctx, obj), "result", result, "duration", elapsed}
	if req, rerr := admission.RequestFromContext(ctx); rerr == nil {
		// As a string, which zap writes as it is; a types.UID it would encode by reflection.
		kv = append(kv, "requestID", string(req.UID))
	}
	switch result {
	case metrics.ResultSkipped:
		kv = append(kv, "skipReason", skip.reason)
	case metrics.ResultDenied:
		kv = append(kv, "reasons", reasons, "message", err.Error())
	}
	if len(warnings) > 0 {
		kv = append(kv, "warnings", []string(warnings))
	}
	if result == metrics.ResultError {
		o.log.Error(err, msg, kv...)
	} else {
		o.log.Info(msg, kv...)
	}
	return warnings, err
}

// classify turns a decorated call's outcome into the result label and, for denials, the
// distinct reasons among its causes (a denial counts once per reason it contains).
func classify(err error, skip *skipRecorder) (result string, reasons []string) {
	switch {
	case skip.skipped:
		return metrics.ResultSkipped, nil
	case err == nil:
		return metrics.ResultAllowed, nil
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return metrics.ResultError, nil
	}
	s := status.Status()
	if s.Code < http.StatusBadRequest || s.Code >= http.StatusInternalServerError {
		return metrics.ResultError, nil
	}
	return metrics.ResultDenied, denialReasons(s)
}

func denialReasons(s metav1.Status) []string {
	if s.Details == nil || len(s.Details.Causes) == 0 {
		return []string{ReasonUnspecified}
	}
	var reasons []string
	seen := map[string]bool{}
	for _, c := range s.Details.Causes {
		r, ok := reasonByCauseType[c.Type]
		if !ok {
			r = ReasonOther
		}
		if !seen[r] {
			seen[r] = true
			reasons = append(reasons, r)
		}
	}
	return reasons
}

type observedValidator[T client.Object] struct {
	observer
	next admission.Validator[T]
}

func (o observedValidator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	return o.observe(ctx, "validate create", admissionv1.Create, obj, func(ctx context.Context) (admission.Warnings, error) {
		return o.next.ValidateCreate(ctx, obj)
	})
}

func (o observedValidator[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	return o.observe(ctx, "validate update", admissionv1.Update, newObj, func(ctx context.Context) (admission.Warnings, error) {
		return o.next.ValidateUpdate(ctx, oldObj, newObj)
	})
}

func (o observedValidator[T]) ValidateDelete(ctx context.Context, obj T) (admission.Warnings, error) {
	return o.observe(ctx, "validate delete", admissionv1.Delete, obj, func(ctx context.Context) (admission.Warnings, error) {
		return o.next.ValidateDelete(ctx, obj)
	})
}

// operationLabel is the "operation" label of a mutating call: the request's operation, bounded
// (the patching handler hands patchers whatever operation a request claims, and anyone who
// reaches the port can send a request); empty without a request.
func operationLabel(ctx context.Context) admissionv1.Operation {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return ""
	}
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect:
		return req.Operation
	default:
		return "OTHER"
	}
}

type observedPatcher[T client.Object] struct {
	observer
	next Patcher[T]
}

func (o observedPatcher[T]) Patch(ctx context.Context, obj T) ([]jsonpatch.JsonPatchOperation, error) {
	var patch []jsonpatch.JsonPatchOperation
	_, err := o.observe(ctx, "default", operationLabel(ctx), obj, func(ctx context.Context) (admission.Warnings, error) {
		var err error
		patch, err = o.next.Patch(ctx, obj)
		return nil, err
	})
	return patch, err
}
