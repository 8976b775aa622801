package hostile

import (
	"context"
	"net/http"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/rawhttp"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// H7: the probe paths on the probe port. No Service exposes that port, so they are reached
// directly (the same paths through the webhook Service are H3's 404s).
func probePaths() types.Feature {
	var w *watch
	return features.New("H7 the probe paths (/healthz, /readyz on the probe port, directly) read no input: any method and any body get the probe's state at once, huge bodies are never read, oversized headers get 431, a garbled request 400").
		WithLabel(suite.LabelScenario, "H7").
		Setup(setup(&w, "H7")).
		Assess("every hostile request to a probe path gets a bounded answer", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var checks []check
			ok := plain(http.StatusOK, "ok", answerBound, false)
			for _, p := range w.probePaths {
				checks = append(checks,
					w.onHealth(rawhttp.Request{Method: http.MethodGet, Path: p, Length: -1, What: "the kubelet's GET"}, answerBound, ok),
					w.onHealth(rawhttp.Send(http.MethodPost, p, "application/json", []byte(admissionReviewStart+`u"}}`), "a POST of a review"), answerBound, ok),
					w.onHealth(rawhttp.Send(http.MethodPut, p, "text/plain", []byte("x"), "a PUT"), answerBound, ok),
					w.onHealth(rawhttp.Send(http.MethodDelete, p, "", nil, "a DELETE"), answerBound, ok),
					w.onHealth(rawhttp.Send(http.MethodPost, p, "application/json", []byte("{"), "a truncated body"), answerBound, ok),
					w.onHealth(rawhttp.Request{Method: http.MethodPost, Path: p, ContentType: "application/json", Length: hugeBody,
						Body: rawhttp.Streamed(hugeBody, admissionReviewStart, reviewEnd), What: "a " + rawhttp.SizeName(hugeBody) + " body (Content-Length)"},
						hugeWait, plain(http.StatusOK, "ok", answerBound, true)),
					w.onHealth(rawhttp.Request{Method: http.MethodPost, Path: p, ContentType: "application/json", Length: -1, Chunked: true,
						Body: rawhttp.Streamed(hugeBody, admissionReviewStart, reviewEnd), What: "a " + rawhttp.SizeName(hugeBody) + " body (chunked)"},
						hugeWait, plain(http.StatusOK, "ok", answerBound, true)),
					w.onHealth(hugeHeaders(p), answerBound, plain(http.StatusRequestHeaderFieldsTooLarge, "431 Request Header Fields Too Large", answerBound, true)),
					w.onHealth(rawhttp.Request{Method: "GET /x", Path: p, Length: -1, What: "a garbled request line"}, answerBound,
						plain(http.StatusBadRequest, "400 Bad Request", answerBound, true)),
				)
			}
			runChecks(ctx, t, "requests", 4, checks)
			return ctx
		}).
		Assess(heldStep, held(&w)).
		Feature()
}
