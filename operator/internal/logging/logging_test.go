package logging

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
)

// logs is everything the process logged through Install, as JSON lines.
var logs syncBuffer

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// entries are the JSON entries logged so far whose message contains msg; a line that is not
// JSON fails the test.
func (s *syncBuffer) entries(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), "a log line is not JSON: %s", sc.Text())
		if m, _ := e["msg"].(string); strings.Contains(m, msg) {
			out = append(out, e)
		}
	}
	return out
}

// TestMain installs the operator's logger once, as main does: controller-runtime's global
// logger can be set only once per process.
func TestMain(m *testing.M) {
	Install(New(zap.Options{}, io.MultiWriter(&logs, os.Stderr)))
	os.Exit(m.Run())
}

// requestEntry checks that an entry about a bad request is one info line with the reason and
// no stack trace.
func requestEntry(t *testing.T, e map[string]any, reason string) {
	t.Helper()
	assert.Equal(t, "info", e["level"], "entry: %v", e)
	assert.NotContains(t, e, "stacktrace", "entry: %v", e)
	assert.Contains(t, e["error"], reason, "entry: %v", e)
}

func TestMalformedAdmissionRequestsAreInfoLinesWithTheReason(t *testing.T) {
	wh := &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})}
	for _, tc := range []struct {
		name, contentType, body, msg, reason string
	}{
		{"no body", "application/json", "", "bad request", "request body is empty"},
		{"not JSON", "application/json", "{not json", "unable to decode the request", "invalid character"},
		{"wrong content type", "text/plain", `{}`, "unknown content type", "contentType=text/plain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(logs.entries(t, tc.msg))
			req := httptest.NewRequest(http.MethodPost, "/validate", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.contentType)
			if tc.body == "" {
				req.Body = http.NoBody
			}
			wh.ServeHTTP(httptest.NewRecorder(), req)
			got := logs.entries(t, tc.msg)
			require.Len(t, got, before+1, "want one entry %q", tc.msg)
			requestEntry(t, got[len(got)-1], tc.reason)
		})
	}
}

func TestMalformedConversionRequestsAreInfoLinesWithTheReason(t *testing.T) {
	h := conversion.NewWebhookHandler(runtime.NewScheme(), conversion.NewRegistry())
	for _, tc := range []struct {
		name, body, msg, reason string
	}{
		{"not JSON", "{not json", "failed to read conversion request", "invalid character"},
		{"no request", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, "conversion request is nil", ""},
		{"unknown kind", `{"request":{"uid":"1","desiredAPIVersion":"x/v1","objects":[{"apiVersion":"x/v2","kind":"Nope"}]}}`,
			"failed to convert", "no kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(logs.entries(t, tc.msg))
			req := httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(httptest.NewRecorder(), req)
			got := logs.entries(t, tc.msg)
			require.Len(t, got, before+1, "want one entry %q", tc.msg)
			e := got[len(got)-1]
			assert.Equal(t, "info", e["level"], "entry: %v", e)
			assert.NotContains(t, e, "stacktrace", "entry: %v", e)
			if tc.reason != "" {
				assert.Contains(t, e["error"], tc.reason, "entry: %v", e)
			}
		})
	}
}

func TestOtherErrorsKeepTheirLevel(t *testing.T) {
	New(zap.Options{}, &logs).WithName("cert-controller").Error(errors.New("denied"), "other error")
	got := logs.entries(t, "other error")
	require.Len(t, got, 1)
	assert.Equal(t, "error", got[0]["level"])
	assert.Equal(t, "denied", got[0]["error"])
}

// A net/http server without an ErrorLog (controller-runtime's webhook, metrics and probe
// servers) writes handshake errors through the standard library's log package: they arrive as
// JSON entries, at info once per interval.
func TestHandshakeErrorsOfAServerWithoutErrorLogAreRateLimitedEntries(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler()) // its http.Server has no ErrorLog
	srv.StartTLS()
	t.Cleanup(srv.Close)

	for range 3 { // plain HTTP to a TLS port
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		_, _ = io.Copy(io.Discard, c)
		_ = c.Close()
	}
	require.Eventually(t, func() bool { return len(logs.entries(t, "TLS handshake error")) > 0 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	got := logs.entries(t, "TLS handshake error")
	require.Len(t, got, 1, "three handshake errors within the interval: one info entry")
	assert.Equal(t, "info", got[0]["level"])
	assert.Equal(t, "http", got[0]["logger"])
	assert.Contains(t, got[0]["error"], "client sent an HTTP request to an HTTPS server")
	assert.Contains(t, got[0]["remote"], "127.0.0.1:")
}

func TestHandshakeRateLimit(t *testing.T) {
	var buf syncBuffer
	now := time.Unix(0, 0)
	w := &httpErrorLog{log: New(zap.Options{Level: zapcore.DebugLevel}, &buf), every: 10 * time.Second, now: func() time.Time { return now }}
	line := []byte("http: TLS handshake error from 10.0.0.1:1234: EOF\n")
	for range 4 {
		_, _ = w.Write(line)
		now = now.Add(time.Second)
	}
	now = now.Add(10 * time.Second)
	_, _ = w.Write(line)
	var infos, debugs []map[string]any
	for _, e := range buf.entries(t, "TLS handshake error") {
		if e["level"] == "info" {
			infos = append(infos, e)
		} else {
			debugs = append(debugs, e)
		}
	}
	require.Len(t, infos, 2)
	assert.InDelta(t, 0, infos[0]["suppressedSinceLast"], 0)
	assert.InDelta(t, 3, infos[1]["suppressedSinceLast"], 0)
	assert.Equal(t, "EOF", infos[1]["error"])
	assert.Len(t, debugs, 3, "the suppressed ones at debug level")

	_, _ = w.Write([]byte("http: Accept error: too many open files; retrying in 5ms\n"))
	got := buf.entries(t, "Accept error")
	require.Len(t, got, 1)
	assert.Equal(t, "info", got[0]["level"])
}

// Every admission's validate line is kept: controller-runtime's production logger would keep
// 100 entries with the same message per second and then one in 100.
func TestNothingIsSampledAway(t *testing.T) {
	var out syncBuffer
	l := New(zap.Options{}, &out)
	const n = 1000
	for i := range n {
		l.Info("validate create", "name", i)
	}
	logged := len(out.entries(t, "validate create"))
	assert.Equal(t, n, logged, "every entry logged within one second")
}

// The level asked for still holds: building without a sampler must not leave debug enabled.
func TestTheLevelAskedForHolds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      zap.Options
		debugSeen bool
	}{
		{"default", zap.Options{}, false},
		{"--zap-log-level=debug", zap.Options{Level: zapcore.DebugLevel}, true},
		{"--zap-log-level=error", zap.Options{Level: zapcore.ErrorLevel}, false},
		{"--zap-devel", zap.Options{Development: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			l := New(tc.opts, &out)
			l.V(1).Info("debug entry")
			l.V(2).Info("below debug")
			assert.Equal(t, tc.debugSeen, strings.Contains(out.String(), "debug entry"), "V(1) logged: %s", out.String())
			assert.NotContains(t, out.String(), "below debug", "V(2) is never logged")
			if tc.opts.Level == zapcore.ErrorLevel {
				l.Info("info entry")
				assert.NotContains(t, out.String(), "info entry", "--zap-log-level=error drops info")
			}
		})
	}
}
