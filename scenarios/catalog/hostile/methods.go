package hostile

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/rawhttp"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// H3: the wrong method, the wrong Content-Type, paths the server does not serve, headers too
// large.
func wrongMethodsAndTypes() types.Feature {
	var w *watch
	return features.New("H3 GET/PUT/DELETE/PATCH instead of POST get 405, another Content-Type 415, unserved paths (the probe paths included) 404, oversized headers 431, on every webhook path directly and through the Service").
		WithLabel(suite.LabelScenario, "H3").
		Setup(setup(&w, "H3")).
		Assess("every request the webhook server does not serve is refused with a status and the reason", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var checks []check
			for _, p := range w.webhookPaths {
				valid := p.validBody()
				for _, r := range w.routes {
					for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch} {
						req := rawhttp.Send(m, p.path, "application/json", valid, m+" of a valid review")
						if m == http.MethodGet {
							req = rawhttp.Request{Method: m, Path: p.path, Length: -1, What: "GET without a body"}
						}
						checks = append(checks, w.onWebhook(r, req, answerBound,
							allowPOST(plain(http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: %s accepts POST", m, p.path), answerBound, true))))
					}
					for _, ct := range []string{"text/plain", "application/yaml", "application/x-www-form-urlencoded", ""} {
						what := "a valid review as " + ct
						if ct == "" {
							what = "a valid review without a Content-Type"
						}
						checks = append(checks, w.onWebhook(r, rawhttp.Send(http.MethodPost, p.path, ct, valid, what), answerBound,
							plain(http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q not supported: %s accepts application/json", ct, p.path), answerBound, true)))
					}
				}
			}
			for _, r := range w.routes {
				for _, path := range append([]string{"/", "/validate", "/mutate-nvidia-com-v1alpha1-dynamographdeployment/x", "/metrics", "/debug/pprof/"}, w.probePaths...) {
					checks = append(checks, w.onWebhook(r, rawhttp.Request{Method: http.MethodGet, Path: path, Length: -1, What: "a path the webhook server does not serve"}, answerBound,
						plain(http.StatusNotFound, "404 page not found", answerBound, false)))
				}
				checks = append(checks, w.onWebhook(r, hugeHeaders(w.webhookPaths[0].path), answerBound,
					plain(http.StatusRequestHeaderFieldsTooLarge, "431 Request Header Fields Too Large", answerBound, true)))
			}
			runChecks(ctx, t, "requests", 4, checks)
			return ctx
		}).
		Assess(heldStep, held(&w)).
		Feature()
}

// allowPOST adds to judge that a 405 names POST in its Allow header.
func allowPOST(judge func(rawhttp.Answer) string) func(rawhttp.Answer) string {
	return func(a rawhttp.Answer) string {
		if want := judge(a); want != "" {
			return want
		}
		if got := a.Header.Get("Allow"); got != http.MethodPost {
			return fmt.Sprintf("an Allow: POST header (saw %q)", got)
		}
		return ""
	}
}

// hugeHeaders is a request whose headers are 2 MiB, twice the servers' limit (1 MiB).
func hugeHeaders(path string) rawhttp.Request {
	value := strings.Repeat("h", 64<<10)
	return rawhttp.Request{Method: http.MethodPost, Path: path, Length: 0, What: "2 MiB of headers", ContentType: "application/json",
		Headers: strings.Repeat("X-Padding: "+value+"\r\n", 32)}
}
