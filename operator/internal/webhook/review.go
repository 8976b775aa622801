package webhook

import (
	"encoding/json"
	"net/http"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"
)

// admissionReview is an AdmissionReview as the API server sends it: a request, no response.
type admissionReview struct {
	APIVersion string                        `json:"apiVersion"`
	Kind       string                        `json:"kind"`
	Request    *admissionv1.AdmissionRequest `json:"request"`
}

// decodeReview decodes body once, as controller-runtime's admission.Webhook decodes it
// (case-sensitive; sigs.k8s.io/json, as its deserializer) and reports whether the review is one
// AdmissionReviews lets through — a known AdmissionReview version or none, an operation the API
// server sends — along with the AdmissionReview version to answer in.
//
// It says no to anything else, and to any review with a field it does not know or a field
// twice (in the review, the request or its typed fields): only then can a field's name differ from the
// one AdmissionReviews' envelope looks for by case alone, and only then might the two
// decodings disagree. Such a body takes the slow path, whose checks and messages stay as they
// were. What the API server sends passes.
func decodeReview(body []byte) (*admissionv1.AdmissionRequest, schema.GroupVersionKind, bool) {
	var review admissionReview
	strict, err := kjson.UnmarshalStrict(body, &review)
	if err != nil || len(strict) > 0 || review.Request == nil {
		return nil, schema.GroupVersionKind{}, false
	}
	if !admissionOperations[review.Request.Operation] {
		return nil, schema.GroupVersionKind{}, false
	}
	gvk := admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")
	if review.APIVersion+review.Kind != "" {
		if !admissionReviewAPIVersions[review.APIVersion] || review.Kind != "AdmissionReview" {
			return nil, schema.GroupVersionKind{}, false
		}
		gvk = schema.FromAPIVersionAndKind(review.APIVersion, review.Kind)
	}
	return review.Request, gvk, true
}

// serveDecoded answers a decoded review as admission.Webhook.ServeHTTP answers it once it has
// decoded the body: the webhook's Handle (panic recovery, request logger, the decorated rules,
// the response completed with the uid), the answer in an AdmissionReview of the version the
// request came in (gvk), and the same V(5) lines. ServeHTTP would decode the body again, and
// its deserializer reads it three times over: twice the cost of everything else the server
// does for a review.
func (a admissionReviews) serveDecoded(w http.ResponseWriter, r *http.Request, request *admissionv1.AdmissionRequest, gvk schema.GroupVersionKind) {
	wh := a.webhook
	ctx := r.Context()
	if wh.WithContextFunc != nil {
		ctx = wh.WithContextFunc(ctx, r)
	}
	req := admission.Request{AdmissionRequest: *request}
	if a.webhookLog.V(5).Enabled() { // the request logger logs on webhookLog's sink
		a.requestLogger(&req).V(5).Info("received request")
	}

	resp := wh.Handle(ctx, req)
	answer := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
	answer.SetGroupVersionKind(gvk)
	if err := json.NewEncoder(w).Encode(answer); err != nil {
		log := a.requestLogger(nil)
		log.Error(err, "unable to encode and write the response")
		serverError := admission.Errored(http.StatusInternalServerError, err)
		if err := json.NewEncoder(w).Encode(admissionv1.AdmissionReview{Response: &serverError.AdmissionResponse}); err != nil {
			log.Error(err, "still unable to encode and write the InternalServerError response")
		}
		return
	}
	if a.webhookLog.V(5).Enabled() {
		log := a.requestLogger(nil)
		res := answer.Response
		if res.Result != nil {
			log = log.WithValues("code", res.Result.Code, "reason", res.Result.Reason, "message", res.Result.Message)
		}
		log.V(5).Info("wrote response", "requestID", res.UID, "allowed", res.Allowed)
	}
}

// requestLogger is the logger admission.Webhook logs req on (nil: not about one request).
func (a admissionReviews) requestLogger(req *admission.Request) logr.Logger {
	if c := a.webhook.LogConstructor; c != nil {
		return c(a.webhookLog, req)
	}
	return admission.DefaultLogConstructor(a.webhookLog, req)
}
