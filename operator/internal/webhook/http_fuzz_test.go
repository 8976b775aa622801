package webhook

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// FuzzWebhookServer sends arbitrary bytes, as one HTTP/1.1 connection, to a real net/http
// server on loopback serving the webhook server's mux with every webhook Register adds — the
// whole chain a request from outside meets after TLS: net/http's parsing, the mux, Guarded,
// BoundedBody, the review checks, controller-runtime's handlers and the rules. The seeds are a
// valid request for every path and the hostile shapes of the e2e hostile suite (H1–H6). Run it
// alone with
//
//	go test ./internal/webhook -run='^$' -fuzz=FuzzWebhookServer -fuzztime=30s
//
// For every input the server must:
//   - answer or close the connection within a bound (never hang);
//   - never answer 5xx, except net/http's own 501/505 for a transfer coding or protocol
//     version it does not implement;
//   - say what was wrong: every 4xx of a webhook path has a body;
//   - on a webhook path, answer any method but POST with 405, any other Content-Type with 415;
//   - answer a review with a review: an admission denial carries a 4xx code and a message, a
//     failed conversion a message (never controller-runtime's panic message).
func FuzzWebhookServer(f *testing.F) {
	addr := serveFuzz(f, servedMuxWith(f, Config{OperatorVersion: testOperatorVersion, DefaultDGDRImage: testDGDRImage,
		BodyReadTimeout: 500 * time.Millisecond}))
	for _, tc := range handlerCases(f) {
		f.Add(rawRequest(http.MethodPost, tc.path, "application/json", tc.valid))
		if tc.invalid != nil {
			f.Add(rawRequest(http.MethodPost, tc.path, "application/json", tc.invalid))
		}
		f.Add(rawRequest(http.MethodGet, tc.path, "application/json", nil))
		f.Add(rawRequest(http.MethodPut, tc.path, "application/json", tc.valid))
		f.Add(rawRequest(http.MethodPost, tc.path, "text/plain", tc.valid))
		f.Add(chunkedRequest(tc.path, tc.valid))
		f.Add(rawRequest(http.MethodPost, tc.path, "application/json", tc.valid[:len(tc.valid)/2]))
	}
	convert := conversionReview(f, "nvidia.com/v1beta1", &v1alpha1.DynamoGraphDeploymentRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeploymentRequest"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "profile"},
		Spec:       v1alpha1.DynamoGraphDeploymentRequestSpec{Backend: "vllm"},
	})
	for _, body := range [][]byte{convert, convert[:len(convert)/2], nil, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}`)} {
		f.Add(rawRequest(http.MethodPost, ConversionPath, "application/json", body))
	}
	f.Add(chunkedRequest(ConversionPath, convert))
	f.Add(rawRequest(http.MethodGet, ConversionPath, "", nil))
	nested := []byte(strings.Repeat(`{"a":`, 12000) + "1" + strings.Repeat("}", 12000))
	f.Add(rawRequest(http.MethodPost, ConversionPath, "application/json", nested))
	f.Add(rawRequest(http.MethodPost, servedPaths[0], "application/json", nested))
	// A declared length far over the limit with a few bytes behind it, Expect: 100-continue,
	// an unknown path, a probe path, HTTP/2's preface, an unsupported protocol version and
	// transfer coding, headers cut short, nothing at all.
	f.Add([]byte("POST " + ConversionPath + " HTTP/1.1\r\nHost: w\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n{\"a\":"))
	f.Add([]byte("POST " + servedPaths[1] + " HTTP/1.1\r\nHost: w\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add(rawRequest(http.MethodPost, "/nope", "application/json", []byte("{}")))
	f.Add(rawRequest(http.MethodGet, "/healthz", "", nil))
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	f.Add([]byte("POST " + servedPaths[1] + " HTTP/3.0\r\nHost: w\r\n\r\n"))
	f.Add([]byte("POST " + servedPaths[1] + " HTTP/1.1\r\nHost: w\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n"))
	f.Add([]byte("POST " + servedPaths[1] + " HTTP/1.1\r\nHost: w\r\nContent-Ty"))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, raw []byte) {
		status, header, body, err := roundTripRaw(addr, raw)
		if err != nil {
			t.Fatalf("%v for %q", err, trim(raw))
		}
		if status == 0 {
			return // closed without an answer: net/http's way with a request it could not read
		}
		if status >= 500 {
			require.Contains(t, []int{http.StatusNotImplemented, http.StatusHTTPVersionNotSupported}, status,
				"HTTP %d (%q) for %q", status, trim(body), trim(raw))
			return
		}
		if status == http.StatusBadRequest && bytes.HasPrefix(body, []byte("400 Bad Request")) {
			return // net/http refused the request itself (a malformed or missing header, …)
		}
		req, perr := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if perr != nil || !slices.Contains(servedPaths, req.URL.Path) || req.ProtoMajor != 1 {
			return // net/http's own answers (to HTTP/2's preface: a bare 400) and the mux's 404
		}
		if status >= 400 {
			require.NotEmpty(t, bytes.TrimSpace(body), "HTTP %d without a message for %q", status, trim(raw))
		}
		switch {
		case req.Method != http.MethodPost:
			require.Equal(t, http.StatusMethodNotAllowed, status, "%s %s: %q", req.Method, req.URL.Path, trim(body))
			return
		case !isJSON(req.Header.Get("Content-Type")):
			require.Equal(t, http.StatusUnsupportedMediaType, status, "Content-Type %q: %q", req.Header.Get("Content-Type"), trim(body))
			return
		case status != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "application/json"):
			return
		}
		if req.URL.Path == ConversionPath {
			var out apiextensionsv1.ConversionReview
			require.NoError(t, json.Unmarshal(body, &out), "answer %q", trim(body))
			require.NotNil(t, out.Response, "answer %q", trim(body))
			if out.Response.Result.Status == metav1.StatusFailure {
				require.NotEqual(t, "internal error occurred during conversion", out.Response.Result.Message, "panic for %q", trim(raw))
				require.NotEmpty(t, out.Response.Result.Message)
			}
			return
		}
		var out admissionv1.AdmissionReview
		require.NoError(t, json.Unmarshal(body, &out), "answer %q", trim(body))
		require.NotNil(t, out.Response, "answer %q", trim(body))
		if !out.Response.Allowed {
			require.NotNil(t, out.Response.Result, "denial without a status for %q", trim(raw))
			require.True(t, out.Response.Result.Code >= 400 && out.Response.Result.Code < 500,
				"code %d (%s) for %q", out.Response.Result.Code, out.Response.Result.Message, trim(raw))
			require.NotEmpty(t, out.Response.Result.Message, "denial without a message for %q", trim(raw))
		}
	})
}

// serveFuzz serves h on loopback with the webhook server's HTTP settings (controller-runtime's
// httpserver: 32 s for the headers, 1 MiB of them) and returns the address.
func serveFuzz(tb testing.TB, h http.Handler) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 32 * time.Second, MaxHeaderBytes: 1 << 20, IdleTimeout: 90 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// fuzzAnswerBound is how long the server may take to answer a request that is all there (the
// client half-closes after writing it).
const fuzzAnswerBound = 5 * time.Second

// roundTripRaw writes raw on a new connection, half-closes it and reads the first answer:
// status 0 when the server closed without one.
func roundTripRaw(addr string, raw []byte) (int, http.Header, []byte, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, nil, nil, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(fuzzAnswerBound))
	go func() {
		_, _ = conn.Write(raw)
		_ = conn.(*net.TCPConn).CloseWrite()
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err):
		return 0, nil, nil, nil
	case err != nil:
		return 0, nil, nil, fmt.Errorf("no answer within %s: %w", fuzzAnswerBound, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil && !isReset(err) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, nil, nil, fmt.Errorf("reading the answer (HTTP %d) within %s: %w", resp.StatusCode, fuzzAnswerBound, err)
	}
	return resp.StatusCode, resp.Header, body, nil
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset by peer")
}

func rawRequest(method, path, contentType string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: webhook\r\n", method, path)
	if contentType != "" {
		fmt.Fprintf(&b, "Content-Type: %s\r\n", contentType)
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	b.Write(body)
	return b.Bytes()
}

func chunkedRequest(path string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", path)
	for len(body) > 0 {
		n := min(len(body), 100)
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
		body = body[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

// trim shortens a request or answer for a failure message.
func trim(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
