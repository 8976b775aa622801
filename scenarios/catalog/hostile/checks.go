package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/rawhttp"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// check is one hostile request and what must come of it: run returns nil, or an error saying
// what was expected and what was seen.
type check struct {
	run func(ctx context.Context) error
}

// runChecks runs checks, at most parallel at once, and reports every failure; it notes how
// many requests were sent under key.
func runChecks(ctx context.Context, t *testing.T, key string, parallel int, checks []check) {
	t.Helper()
	errs := make([]error, len(checks))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = c.run(ctx)
		})
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			expect.Errorf(t, "%v", err)
		}
	}
	suite.Note(ctx, t, key, len(checks))
	if failed > 0 {
		suite.Note(ctx, t, key+"Failed", failed)
	}
}

// onWebhook sends req to the webhook server by route r (TLS as the API server speaks it) and
// judges the answer with judge; wait bounds the wait for an answer.
func (e *env) onWebhook(r route, req rawhttp.Request, wait time.Duration, judge func(rawhttp.Answer) string) check {
	return check{run: func(ctx context.Context) error {
		conn, err := e.dialTLS(ctx, r)
		if err != nil {
			return fmt.Errorf("%s to %s %s: connecting: %w", req.What, req.Path, r.name, err)
		}
		a := rawhttp.Exchange(ctx, conn, req, wait)
		if want := judge(a); want != "" {
			return fmt.Errorf("expected %s for %s (%s %s) %s; saw %s", want, req.What, req.Method, req.Path, r.name, a)
		}
		return nil
	}}
}

// onHealth is onWebhook for the probe port (plain HTTP, directly to the pod).
func (e *env) onHealth(req rawhttp.Request, wait time.Duration, judge func(rawhttp.Answer) string) check {
	return check{run: func(ctx context.Context) error {
		conn, err := e.dialHealth(ctx)
		if err != nil {
			return fmt.Errorf("%s to %s %s: connecting: %w", req.What, req.Path, e.healthRoute(), err)
		}
		a := rawhttp.Exchange(ctx, conn, req, wait)
		if want := judge(a); want != "" {
			return fmt.Errorf("expected %s for %s (%s %s) %s; saw %s", want, req.What, req.Method, req.Path, e.healthRoute(), a)
		}
		return nil
	}}
}

// The judges: each returns "" when the answer is what it should be, else what was expected.

// plain expects HTTP status with a body containing message, within bound, and — for a refusal
// — the connection closed.
func plain(status int, message string, bound time.Duration, closed bool) func(rawhttp.Answer) string {
	return func(a rawhttp.Answer) string {
		want := fmt.Sprintf("HTTP %d with %q within %s", status, message, bound)
		if closed {
			want += ", the connection closed"
		}
		switch {
		case a.Err != nil, a.Status != status, !strings.Contains(a.Body, message), a.Took > bound:
			return want
		case closed && !a.Closed:
			return want + " (it was left open)"
		}
		return ""
	}
}

// inReview expects what the admission paths answer a request they refuse: 200 with an
// AdmissionReview whose response denies it with code and a message containing message.
func inReview(code int32, message string, bound time.Duration) func(rawhttp.Answer) string {
	return func(a rawhttp.Answer) string {
		want := fmt.Sprintf("HTTP 200 with an AdmissionReview denying it with code %d and %q within %s", code, message, bound)
		if a.Err != nil || a.Status != http.StatusOK || a.Took > bound {
			return want
		}
		var review struct {
			Response *struct {
				Allowed bool `json:"allowed"`
				Status  *struct {
					Code    int32  `json:"code"`
					Message string `json:"message"`
				} `json:"status"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(a.Body), &review); err != nil || review.Response == nil || review.Response.Status == nil {
			return want
		}
		if review.Response.Allowed || review.Response.Status.Code != code || !strings.Contains(review.Response.Status.Message, message) {
			return want
		}
		return ""
	}
}

// conversionFailure expects 200 with a ConversionReview whose result is a Failure naming
// message.
func conversionFailure(message string, bound time.Duration) func(rawhttp.Answer) string {
	return func(a rawhttp.Answer) string {
		want := fmt.Sprintf("HTTP 200 with a ConversionReview whose result is a Failure with %q within %s", message, bound)
		if a.Err != nil || a.Status != http.StatusOK || a.Took > bound {
			return want
		}
		var review struct {
			Response *struct {
				Result struct {
					Status  string `json:"status"`
					Message string `json:"message"`
				} `json:"result"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(a.Body), &review); err != nil || review.Response == nil ||
			review.Response.Result.Status != "Failure" || !strings.Contains(review.Response.Result.Message, message) {
			return want
		}
		return ""
	}
}

// refusal is what a webhook path answers a body it cannot use: on an admission path inside a
// review (code, message), on the conversion path as HTTP code with convertMessage.
func refusal(p webhookPath, code int32, message, convertMessage string, bound time.Duration) func(rawhttp.Answer) string {
	if p.admission {
		return inReview(code, message, bound)
	}
	return plain(int(code), convertMessage, bound, false)
}

// halfCloser is a connection's half-close, which *tls.Conn and *net.TCPConn have.
type halfCloser interface{ CloseWrite() error }
