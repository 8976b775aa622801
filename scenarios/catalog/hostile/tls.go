package hostile

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/rawhttp"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// H6: what the webhook server's TLS refuses.
func tlsPolicy() types.Feature {
	var w *watch
	return features.New("H6 TLS the webhook server refuses — ALPN h2 only, TLS 1.0 or 1.1 only, plain HTTP, garbage instead of a ClientHello — fails at once with the reason, directly and through the Service; TLS 1.2 and 1.3 with HTTP/1.1 work").
		WithLabel(suite.LabelScenario, "H6").
		Setup(setup(&w, "H6")).
		Assess("every refused handshake fails with the reason, the API server's handshake succeeds", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var checks []check
			for _, r := range w.routes {
				checks = append(checks,
					w.handshake(r, "ALPN h2 only", func(c *tls.Config) { c.NextProtos = []string{"h2"} }, "tls: no application protocol"),
					w.handshake(r, "TLS 1.0 only", func(c *tls.Config) { c.MinVersion, c.MaxVersion = tls.VersionTLS10, tls.VersionTLS10 }, "tls: protocol version not supported"),
					w.handshake(r, "TLS 1.1 only", func(c *tls.Config) { c.MinVersion, c.MaxVersion = tls.VersionTLS11, tls.VersionTLS11 }, "tls: protocol version not supported"),
					w.handshake(r, "TLS 1.2 with CBC-SHA1 suites only", func(c *tls.Config) {
						c.MaxVersion = tls.VersionTLS12
						c.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA}
					}, "tls: handshake failure"),
					// What the API server's client offers, and each version on its own: accepted.
					w.handshake(r, "ALPN h2 and http/1.1 (as the API server offers)", func(c *tls.Config) { c.NextProtos = []string{"h2", "http/1.1"} }, ""),
					w.handshake(r, "TLS 1.2 only", func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 }, ""),
					w.handshake(r, "TLS 1.3 only", func(c *tls.Config) { c.MinVersion = tls.VersionTLS13 }, ""),
					w.plainHTTP(r),
					w.garbageHello(r),
				)
			}
			runChecks(ctx, t, "handshakes", 4, checks)
			return ctx
		}).
		Assess(heldStep, held(&w)).
		Feature()
}

// handshake offers the TLS the caBundle and Service name allow, changed by change; refusal is
// the reason the handshake must fail with ("" when it must succeed with HTTP/1.1).
func (e *env) handshake(r route, what string, change func(*tls.Config), refusal string) check {
	return check{run: func(ctx context.Context) error {
		raw, err := r.dial(ctx)
		if err != nil {
			return fmt.Errorf("a handshake with %s %s: connecting: %w", what, r.name, err)
		}
		defer func() { _ = raw.Close() }()
		cfg := e.tls.Clone()
		change(cfg)
		conn := tls.Client(raw, cfg)
		hctx, cancel := context.WithTimeout(ctx, answerBound)
		defer cancel()
		start := time.Now()
		err = conn.HandshakeContext(hctx)
		took := time.Since(start).Round(10 * time.Millisecond)
		switch {
		case refusal == "" && err != nil:
			return fmt.Errorf("expected a handshake with %s %s to succeed; saw %v after %s", what, r.name, err, took)
		case refusal == "" && conn.ConnectionState().NegotiatedProtocol != "http/1.1" && len(cfg.NextProtos) > 0:
			return fmt.Errorf("expected a handshake with %s %s to choose http/1.1; saw %q", what, r.name, conn.ConnectionState().NegotiatedProtocol)
		case refusal == "":
			return nil
		case err == nil:
			return fmt.Errorf("expected a handshake with %s %s to fail with %q; it succeeded (%s, ALPN %q)", what, r.name, refusal,
				tls.VersionName(conn.ConnectionState().Version), conn.ConnectionState().NegotiatedProtocol)
		case !strings.Contains(err.Error(), refusal):
			return fmt.Errorf("expected a handshake with %s %s to fail with %q within %s; saw %v after %s", what, r.name, refusal, answerBound, err, took)
		}
		return nil
	}}
}

// plainHTTP sends a request without TLS to the TLS port: Go's TLS server answers 400 saying so.
func (e *env) plainHTTP(r route) check {
	return check{run: func(ctx context.Context) error {
		conn, err := r.dial(ctx)
		if err != nil {
			return fmt.Errorf("plain HTTP %s: connecting: %w", r.name, err)
		}
		req := rawhttp.Request{Method: http.MethodPost, Path: "/", Length: 0, What: "plain HTTP to the TLS port"}
		a := rawhttp.Exchange(ctx, conn, req, answerBound)
		if want := plain(http.StatusBadRequest, "Client sent an HTTP request to an HTTPS server", answerBound, false)(a); want != "" {
			return fmt.Errorf("expected %s for plain HTTP %s; saw %s", want, r.name, a)
		}
		return nil
	}}
}

// garbageHello sends bytes that are no ClientHello: the server closes the connection.
func (e *env) garbageHello(r route) check {
	return check{run: func(ctx context.Context) error {
		conn, err := r.dial(ctx)
		if err != nil {
			return fmt.Errorf("garbage instead of a ClientHello %s: connecting: %w", r.name, err)
		}
		req := rawhttp.Request{Method: "\x16\x03\x01\x00\x05\x01\x00\x00\x01\xff", Path: "\x00", Length: -1, What: "garbage instead of a ClientHello"}
		a := rawhttp.Exchange(ctx, conn, req, answerBound+time.Second)
		if a.Err == nil || a.Took > answerBound {
			return fmt.Errorf("expected the connection closed within %s after garbage instead of a ClientHello %s; saw %s", answerBound, r.name, a)
		}
		return nil
	}}
}
