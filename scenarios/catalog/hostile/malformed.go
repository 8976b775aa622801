package hostile

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/rawhttp"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// Reviews as the API server would start them, for bodies built around them.
const (
	admissionReviewStart  = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"`
	conversionReviewStart = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"`
	reviewEnd             = `"}}`
)

// reviewStart is the start of the review p's callers send.
func (p webhookPath) reviewStart() string {
	if p.admission {
		return admissionReviewStart
	}
	return conversionReviewStart
}

// validBody is a well-formed review p's handler decodes (its answer is beside the point here).
func (p webhookPath) validBody() []byte {
	if p.admission {
		return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"3f0c1b0e-6f25-4d2a-9a61-8f1d3f2c7a10","operation":"CREATE",` +
			`"kind":{"group":"nvidia.com","version":"v1alpha1","kind":"DynamoGraphDeployment"},"namespace":"team-a",` +
			`"object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment","metadata":{"name":"g","namespace":"team-a"}}}}`)
	}
	return []byte(conversionReviewStart + `c","desiredAPIVersion":"nvidia.com/v1beta1","objects":[{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeploymentRequest","metadata":{"name":"r","namespace":"team-a"},"spec":{"backend":"vllm"}}]}}`)
}

// nestingDepth is ten times the depth the JSON decoders accept (10,000).
const nestingDepth = 100_000

// H1: truncated, empty and deeply nested bodies.
func malformedBodies() types.Feature {
	var w *watch
	return features.New("H1 malformed bodies (empty, truncated, cut short on the wire, deeply nested) to every webhook path, directly and through the Service, get a 400 that says what is wrong").
		WithLabel(suite.LabelScenario, "H1").
		Setup(setup(&w, "H1")).
		Assess("every malformed body gets a bounded 400 with the reason", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var checks []check
			for _, p := range w.webhookPaths {
				valid := p.validBody()
				nestedObject := p.reviewStart() + `x","object":` + strings.Repeat(`{"a":`, nestingDepth) + "1" + strings.Repeat("}", nestingDepth) + "}}"
				nestedArray := strings.Repeat("[", nestingDepth) + strings.Repeat("]", nestingDepth)
				for _, r := range w.routes {
					checks = append(checks,
						w.onWebhook(r, rawhttp.Send(http.MethodPost, p.path, "application/json", nil, "an empty body"), answerBound,
							refusal(p, http.StatusBadRequest, "request body is empty", "request body is empty", answerBound)),
						w.onWebhook(r, rawhttp.Send(http.MethodPost, p.path, "application/json", []byte("  \n\t "), "a body of whitespace"), answerBound,
							refusal(p, http.StatusBadRequest, "request body is empty", "request body is empty", answerBound)),
						w.onWebhook(r, rawhttp.Send(http.MethodPost, p.path, "application/json", valid[:len(valid)/2], "a truncated review"), answerBound,
							refusal(p, http.StatusBadRequest, "decoding the AdmissionReview: unexpected end of JSON input", "decoding the ConversionReview: unexpected end of JSON input", answerBound)),
						w.onWebhook(r, shortOnTheWire(p.path, valid), answerBound,
							refusal(p, http.StatusBadRequest, "unexpected EOF", "reading the request body: unexpected EOF", answerBound)),
						w.onWebhook(r, rawhttp.Send(http.MethodPost, p.path, "application/json", []byte("\x00\xff{not json at all"), "binary garbage"), answerBound,
							refusal(p, http.StatusBadRequest, "decoding the AdmissionReview: invalid character", "decoding the ConversionReview: invalid character", answerBound)),
						w.onWebhook(r, rawhttp.Send(http.MethodPost, p.path, "application/json", []byte(`[{"kind":"AdmissionReview"}]`), "a JSON array"), answerBound,
							refusal(p, http.StatusBadRequest, "decoding the AdmissionReview: expected a JSON object, got array", "decoding the ConversionReview: expected a JSON object, got array", answerBound)),
						w.onWebhook(r, rawhttp.Send(http.MethodPost, p.path, "application/json", []byte(nestedObject), "a review with an object nested 100,000 deep"), answerBound,
							refusal(p, http.StatusBadRequest, "exceeded max depth", "exceeded max depth", answerBound)),
						w.onWebhook(r, rawhttp.Send(http.MethodPost, p.path, "application/json", []byte(nestedArray), "an array nested 100,000 deep"), answerBound,
							refusal(p, http.StatusBadRequest, "exceeded max depth", "exceeded max depth", answerBound)),
					)
				}
			}
			runChecks(ctx, t, "requests", 4, checks)
			return ctx
		}).
		Assess(heldStep, held(&w)).
		Feature()
}

// shortOnTheWire declares body's length but sends only its first half, then half-closes the
// connection (TLS close_notify): the server's read of the body ends early.
func shortOnTheWire(path string, body []byte) rawhttp.Request {
	return rawhttp.Request{Method: http.MethodPost, Path: path, ContentType: "application/json", Length: int64(len(body)),
		What: "a body shorter than its Content-Length, then the end of the stream",
		Body: func(w io.Writer) error {
			if _, err := w.Write(body[:len(body)/2]); err != nil {
				return err
			}
			hc, ok := w.(halfCloser)
			if !ok {
				return errors.New("the connection cannot half-close")
			}
			return hc.CloseWrite()
		}}
}
