package hostile

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/rawhttp"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// hugeWait is how long a client sending a huge body waits for the answer before giving up:
// long enough for a server that reads it all to answer, so the message says what it answered.
const hugeWait = time.Minute

// H4: bodies of 100 MB, declared and chunked, four at once.
func hugeBodies() types.Feature {
	var w *watch
	return features.New("H4 100 MB bodies (declared and chunked, streamed, four at once) to every webhook path, directly and through the Service, get 413 naming the 7 MiB limit within seconds, and the operator's memory stays bounded").
		WithLabel(suite.LabelScenario, "H4").
		Setup(setup(&w, "H4")).
		Assess("every huge body is refused at the limit, quickly", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			limit := "limit is " + strconv.Itoa(maxRequestBytes) + " bytes"
			var checks []check
			for _, p := range w.webhookPaths {
				judge := inReview(http.StatusRequestEntityTooLarge, limit, answerBound)
				if !p.admission {
					judge = plain(http.StatusRequestEntityTooLarge, "the "+limit, answerBound, true)
				}
				for _, r := range w.routes {
					for _, chunked := range []bool{false, true} {
						req := rawhttp.Request{Method: http.MethodPost, Path: p.path, ContentType: "application/json", Length: hugeBody,
							Body: rawhttp.Streamed(hugeBody, p.reviewStart(), reviewEnd), What: "a " + rawhttp.SizeName(hugeBody) + " body (Content-Length)"}
						if chunked {
							req.Length, req.Chunked, req.What = -1, true, "a "+rawhttp.SizeName(hugeBody)+" body (chunked, no length)"
						}
						checks = append(checks, w.withRSS(w.onWebhook(r, req, hugeWait, judge)))
					}
				}
			}
			// Four at once: what took the operator from about 40 MB to 800 MB when /convert read
			// whole bodies (issue 15 finding 1).
			runChecks(ctx, t, "requests", 4, checks)
			suite.Note(ctx, t, "bodyMB", hugeBody>>20)
			return ctx
		}).
		Assess(heldStep, held(&w)).
		Feature()
}

// withRSS adds the operator's memory so far to c's failure.
func (w *watch) withRSS(c check) check {
	return check{run: func(ctx context.Context) error {
		err := c.run(ctx)
		if err != nil {
			return fmt.Errorf("%w; the operator's resident memory so far: %d MiB at most (%d MiB before the input)", err, w.rss.peakMiB(), mib(w.baseline))
		}
		return nil
	}}
}
