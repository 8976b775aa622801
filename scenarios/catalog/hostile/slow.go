package hostile

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/rawhttp"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// Slow clients: one header line a second (slowloris), one body byte every half second.
const (
	slowHeaderEvery = time.Second
	slowByteEvery   = 500 * time.Millisecond
	// slowBodyLength is the Content-Length a slow body declares: at one byte every half second
	// it would take over an hour to arrive.
	slowBodyLength = 10_000
	// slowWait is how long a slow client waits to be cut off before it gives up.
	slowWait = headerTimeout + 2*cutOffSlack
)

// H5: slowloris headers and slow bodies.
func slowClients() types.Feature {
	var w *watch
	return features.New("H5 slow clients — slowloris headers and a body a byte at a time — are cut off after a bounded time on every webhook path (directly and through the Service) and on the probe port").
		WithLabel(suite.LabelScenario, "H5").
		Setup(setup(&w, "H5")).
		Assess("every slow client is cut off in time", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var checks []check
			headerBound := headerTimeout + cutOffSlack
			bodyBound := bodyTimeout + cutOffSlack
			for _, r := range w.routes {
				checks = append(checks,
					w.onWebhook(r, slowHeaders(w.webhookPaths[0].path), slowWait, cutOff(headerBound)),
					w.silent(r.name, r.dial, headerBound))
			}
			probeBound := probeReadTimeout + cutOffSlack
			checks = append(checks, w.silent(w.healthRoute(), w.dialHealth, probeBound))
			for _, p := range w.probePaths {
				checks = append(checks,
					w.onHealth(slowHeaders(p), slowWait, cutOff(probeBound)),
					w.onHealth(slowBody(p, "ok"), slowWait, cutOff(probeBound)))
			}
			for _, p := range w.webhookPaths {
				for _, r := range w.routes {
					want := fmt.Sprintf("request body not received within %s", bodyTimeout)
					checks = append(checks, w.onWebhook(r, slowBody(p.path, p.reviewStart()), slowWait,
						refusal(p, http.StatusBadRequest, want, want, bodyBound)))
				}
			}
			// All at once: the server must cut each off on its own clock, however many there are.
			start := time.Now()
			runChecks(ctx, t, "slowClients", len(checks), checks)
			suite.Note(ctx, t, "seconds", time.Since(start).Round(100*time.Millisecond).Seconds())
			return ctx
		}).
		Assess(heldStep, held(&w)).
		Feature()
}

// silent connects and sends nothing — not even a TLS ClientHello: the server must hang up
// within bound.
func (e *env) silent(name string, dial func(context.Context) (net.Conn, error), bound time.Duration) check {
	return check{run: func(ctx context.Context) error {
		conn, err := dial(ctx)
		if err != nil {
			return fmt.Errorf("a silent connection %s: connecting: %w", name, err)
		}
		defer func() { _ = conn.Close() }()
		start := time.Now()
		_ = conn.SetReadDeadline(start.Add(slowWait))
		_, err = io.Copy(io.Discard, conn)
		took := time.Since(start).Round(100 * time.Millisecond)
		if rawhttp.IsTimeout(err) || took > bound {
			return fmt.Errorf("expected a connection that sends nothing %s to be closed within %s; it was still open after %s", name, bound, took)
		}
		return nil
	}}
}

// slowHeaders is a request whose headers never end: a header line every slowHeaderEvery.
func slowHeaders(path string) rawhttp.Request {
	return rawhttp.Request{Method: http.MethodPost, Path: path, SlowHeaders: slowHeaderEvery, Length: -1,
		What: fmt.Sprintf("headers that never end (a line every %s)", slowHeaderEvery)}
}

// slowBody is a request with its headers at once and its body (start, then spaces) a byte
// every slowByteEvery.
func slowBody(path, start string) rawhttp.Request {
	return rawhttp.Request{Method: http.MethodPost, Path: path, ContentType: "application/json", Length: slowBodyLength,
		What: fmt.Sprintf("a %d-byte body sent a byte every %s", slowBodyLength, slowByteEvery),
		Body: func(w io.Writer) error {
			for i := range slowBodyLength {
				b := byte(' ')
				if i < len(start) {
					b = start[i]
				}
				if _, err := w.Write([]byte{b}); err != nil {
					return err
				}
				time.Sleep(slowByteEvery)
			}
			return nil
		}}
}

// cutOff expects the server to end a slow client within bound: the connection closed, or an
// answer after which it is closed.
func cutOff(bound time.Duration) func(rawhttp.Answer) string {
	return func(a rawhttp.Answer) string {
		want := fmt.Sprintf("the connection cut off within %s", bound)
		switch {
		case a.Took > bound:
			return want
		case a.Err == nil && !a.Closed:
			return want + " (it was answered and left open)"
		}
		return ""
	}
}
