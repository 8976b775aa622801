package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// DefaultBodyReadTimeout bounds how long the webhook server waits for a request's body once its
// headers are in. The API server sends a review in one write and gives up on a call after the
// webhook's timeoutSeconds (at most 30 s); a client that trickles its body is cut off after
// this long instead of holding a connection and a handler for as long as it likes. (Headers
// are bounded by the server's ReadHeaderTimeout, 32 s in controller-runtime.)
const DefaultBodyReadTimeout = 10 * time.Second

// Guarded serves next only requests a webhook can answer, so that what reaches the admission
// and conversion handlers is what the API server sends: a POST of application/json whose body
// arrives within bodyTimeout (Register uses Config.BodyReadTimeout, by default
// DefaultBodyReadTimeout). Anything else gets a one-line plain-text reason and never reaches
// next:
//
//   - another method: 405 Method Not Allowed (Allow: POST);
//   - another Content-Type: 415 Unsupported Media Type;
//   - a body that does not arrive within bodyTimeout: the handler's read fails with an
//     error saying so (the handlers answer it as a bad request) and the connection is closed.
//
// Every webhook path of the server is registered through it (Register wraps the manager's
// webhook server).
func Guarded(log logr.Logger, bodyTimeout time.Duration, next http.Handler) http.Handler {
	return guarded{log: log, next: next, bodyTimeout: bodyTimeout}
}

type guarded struct {
	log         logr.Logger
	next        http.Handler
	bodyTimeout time.Duration
}

func (g guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reject(w, r, g.log, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: %s accepts POST", r.Method, r.URL.Path))
		return
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		reject(w, r, g.log, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q not supported: %s accepts application/json", ct, r.URL.Path))
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		// Bound the wait for the body, then lift the bound once it is read: a handler that is
		// still working afterwards (slow rules, the test-only latency injection) must not see
		// its connection's context cancelled by the deadline.
		// next gets a shallow copy: net/http still sees its own body in the original request
		// and, after next returns, closes the connection or discards what is left of it.
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(g.bodyTimeout)); err == nil {
			bounded := *r
			bounded.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, timeout: g.bodyTimeout}
			r = &bounded
		}
	}
	g.next.ServeHTTP(w, r)
}

// isJSON says whether a Content-Type is application/json (parameters such as charset allowed).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// deadlineBody is a request body read under a deadline: a read that times out says so in its
// error, and the deadline is lifted once the body has been read to its end.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	done    bool
}

func (d *deadlineBody) Read(p []byte) (int, error) {
	n, err := d.ReadCloser.Read(p)
	switch {
	case err == nil || d.done:
	case errors.Is(err, io.EOF):
		d.done = true
		_ = d.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("request body not received within %s: %w", d.timeout, err)
	}
	return n, err
}

// ConversionReviews serves next only bodies that are a ConversionReview of
// apiextensions.k8s.io/v1 (the only version the chart's CRDs ask the API server for,
// conversionReviewVersions [v1]; a body without apiVersion and kind is taken as one, as
// controller-runtime does) with a request. controller-runtime's conversion handler answers a
// body it cannot decode with a bare 400 and an empty body, and converts anything that
// decodes — say an AdmissionReview — as an empty request; here each gets a 400 whose body says
// what was wrong. It reads the body whole: serve it behind BoundedBody.
func ConversionReviews(log logr.Logger, next http.Handler) http.Handler {
	return conversionReviews{log: log, next: next}
}

type conversionReviews struct {
	log  logr.Logger
	next http.Handler
}

// conversionReviewAPIVersion is the only ConversionReview version served.
const conversionReviewAPIVersion = "apiextensions.k8s.io/v1"

func (c conversionReviews) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			reject(w, r, c.log, http.StatusBadRequest, "reading the request body: "+err.Error())
			return
		}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		reject(w, r, c.log, http.StatusBadRequest, "request body is empty: expected a ConversionReview")
		return
	}
	var envelope struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Request    json.RawMessage `json:"request"`
	}
	if err := decodeJSON(body, &envelope); err != nil {
		reject(w, r, c.log, http.StatusBadRequest, "decoding the ConversionReview: "+err.Error())
		return
	}
	if envelope.APIVersion+envelope.Kind != "" && (envelope.APIVersion != conversionReviewAPIVersion || envelope.Kind != "ConversionReview") {
		reject(w, r, c.log, http.StatusBadRequest, fmt.Sprintf("expected a ConversionReview of %s, got kind %q of apiVersion %q",
			conversionReviewAPIVersion, envelope.Kind, envelope.APIVersion))
		return
	}
	if len(envelope.Request) == 0 || string(envelope.Request) == "null" {
		reject(w, r, c.log, http.StatusBadRequest, "the ConversionReview has no request")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.next.ServeHTTP(w, r)
}

// AdmissionReviews serves next — controller-runtime's admission handler — only bodies it can
// answer meaningfully. controller-runtime answers any kind and any apiVersion as if it were an
// AdmissionReview of admission.k8s.io/v1, echoing the foreign kind in its answer with a
// message about something else ("unknown operation"); here a body that names another kind or
// apiVersion is answered, inside an AdmissionReview like every other bad request on these
// paths, with a 400 that says so; so is a body that is not JSON (controller-runtime would try
// it as YAML). Versions served: admission.k8s.io/v1 (what the chart's
// webhook configurations ask for) and v1beta1 (which controller-runtime also answers); a body
// without apiVersion and kind goes on, as before. A review whose operation is not one the API
// server sends (CREATE, UPDATE, DELETE, CONNECT) is refused too. The body is read up to MaxRequestBytes —
// controller-runtime's own limit, answered with the same 413 — and handed on from memory.
//
// A review the API server sends is decoded once: when next is controller-runtime's
// admission.Webhook, AdmissionReviews hands it the decoded request (see serveDecoded).
func AdmissionReviews(log logr.Logger, next http.Handler) http.Handler {
	a := admissionReviews{log: log, next: next}
	if wh, ok := next.(*admission.Webhook); ok {
		a.webhook, a.webhookLog = wh, ctrllog.Log.WithName("admission")
	}
	return a
}

type admissionReviews struct {
	log  logr.Logger
	next http.Handler
	// webhook is next when it is an admission.Webhook, with the logger it logs on.
	webhook    *admission.Webhook
	webhookLog logr.Logger
}

// admissionOperations are the operations an AdmissionReview may ask about.
var admissionOperations = map[admissionv1.Operation]bool{admissionv1.Create: true, admissionv1.Update: true, admissionv1.Delete: true, admissionv1.Connect: true}

// admissionReviewAPIVersions are the AdmissionReview versions served.
var admissionReviewAPIVersions = map[string]bool{"admission.k8s.io/v1": true, "admission.k8s.io/v1beta1": true}

func (a admissionReviews) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		a.next.ServeHTTP(w, r)
		return
	}
	body, err := readBody(r, MaxRequestBytes+1)
	switch {
	case err != nil:
		a.rejectInReview(w, r, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	case int64(len(body)) > MaxRequestBytes:
		a.rejectInReview(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request entity is too large; limit is %d bytes", MaxRequestBytes))
		return
	}
	if len(bytes.TrimSpace(body)) == 0 {
		a.rejectInReview(w, r, http.StatusBadRequest, "request body is empty")
		return
	}
	if a.webhook != nil && r.Header.Get("Content-Type") == "application/json" {
		if review, gvk, ok := decodeReview(body); ok {
			a.serveDecoded(w, r, review, gvk)
			return
		}
	}
	var envelope struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Request    *struct {
			Operation admissionv1.Operation `json:"operation"`
		} `json:"request"`
	}
	// controller-runtime's decoder takes what is not JSON for YAML and answers with a YAML
	// parser's complaint; these paths accept JSON only, so the JSON decoder says what is wrong.
	if err := decodeJSON(body, &envelope); err != nil {
		a.rejectInReview(w, r, http.StatusBadRequest, "decoding the AdmissionReview: "+err.Error())
		return
	}
	if envelope.APIVersion+envelope.Kind != "" && (!admissionReviewAPIVersions[envelope.APIVersion] || envelope.Kind != "AdmissionReview") {
		a.rejectInReview(w, r, http.StatusBadRequest, fmt.Sprintf("expected an AdmissionReview of admission.k8s.io/v1, got kind %q of apiVersion %q",
			envelope.Kind, envelope.APIVersion))
		return
	}
	// controller-runtime's mutating handler answers any operation with a patch; only the API
	// server's four are answered.
	switch req := envelope.Request; {
	case req == nil:
		a.rejectInReview(w, r, http.StatusBadRequest, "the AdmissionReview has no request")
		return
	case !admissionOperations[req.Operation]:
		a.rejectInReview(w, r, http.StatusBadRequest, fmt.Sprintf("unknown operation %q", req.Operation))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	a.next.ServeHTTP(w, r)
}

// readBody reads at most limit bytes of r's body into a buffer sized for its declared
// Content-Length, so that a body of the size it announced is read without growing the buffer.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n < limit {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom wants MinRead bytes free to read the end of the body
	}
	_, err := buf.ReadFrom(io.LimitReader(r.Body, limit))
	return buf.Bytes(), err
}

// rejectInReview answers a request on an admission path the way controller-runtime answers
// one it cannot decode: 200 with an AdmissionReview whose response denies it with code and
// reason. The connection is closed: what is left of the body is never read.
func (a admissionReviews) rejectInReview(w http.ResponseWriter, r *http.Request, code int32, reason string) {
	a.log.Info("Rejected webhook request", "path", r.URL.Path, "method", r.Method, "remote", r.RemoteAddr, "code", code, "reason", reason)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Code: code, Message: reason}},
	})
}

// decodeJSON decodes body into the envelope v, saying in plain words when body is JSON but
// not an object ("expected a JSON object, got array").
func decodeJSON(body []byte, v any) error {
	err := json.Unmarshal(body, v)
	if typeErr := (*json.UnmarshalTypeError)(nil); errors.As(err, &typeErr) && typeErr.Field == "" {
		return fmt.Errorf("expected a JSON object, got %s", typeErr.Value)
	}
	return err
}

// reject answers code with reason as a plain-text body and closes the connection (the rest of
// a body is never read). Rejections are logged at info level: whoever can reach the port
// decides how many there are.
func reject(w http.ResponseWriter, r *http.Request, log logr.Logger, code int, reason string) {
	log.Info("Rejected webhook request", "path", r.URL.Path, "method", r.Method, "remote", r.RemoteAddr, "code", code, "reason", reason)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Connection", "close")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, reason+"\n") //nolint:gosec // text/plain with nosniff: never rendered as HTML
}

// guardedManager is a manager whose webhook server serves every handler registered on it —
// by Register and by controller-runtime's webhook builder alike — through Guarded.
type guardedManager struct {
	ctrl.Manager
	server guardedServer
}

func withGuardedServer(mgr ctrl.Manager, log logr.Logger, bodyTimeout time.Duration) guardedManager {
	return guardedManager{Manager: mgr, server: guardedServer{Server: mgr.GetWebhookServer(), log: log, bodyTimeout: bodyTimeout}}
}

func (m guardedManager) GetWebhookServer() ctrlwebhook.Server { return m.server }

type guardedServer struct {
	ctrlwebhook.Server
	log         logr.Logger
	bodyTimeout time.Duration
}

// Register serves hook at path through Guarded and, on every path but ConversionPath (whose
// handler Register composes itself), through AdmissionReviews.
func (s guardedServer) Register(path string, hook http.Handler) {
	if path != ConversionPath {
		hook = AdmissionReviews(s.log, hook)
	}
	s.Server.Register(path, Guarded(s.log, s.bodyTimeout, hook))
}
