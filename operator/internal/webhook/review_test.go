package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/internal/scheme"
)

// recordingServer is a webhook server that keeps the handler registered for each path.
type recordingServer struct {
	ctrlwebhook.Server
	hooks map[string]http.Handler
}

func (s *recordingServer) Register(path string, hook http.Handler) {
	s.hooks[path] = hook
	s.Server.Register(path, hook)
}

// registeredHooks registers every webhook as Register does and returns, for each admission
// path, the handler registered (Guarded around AdmissionReviews) and the same handler with
// AdmissionReviews' one-decode path off: controller-runtime's admission.Webhook decodes the
// review, as it did before that path existed.
func registeredHooks(t *testing.T) (served, decodedTwice map[string]http.Handler) {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	rec := &recordingServer{Server: ctrlwebhook.NewServer(ctrlwebhook.Options{}), hooks: map[string]http.Handler{}}
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logr.Discard(),
		WebhookServer:          rec,
	})
	require.NoError(t, err)
	require.NoError(t, Register(mgr, Config{OperatorVersion: testOperatorVersion, DefaultDGDRImage: testDGDRImage}))
	served, decodedTwice = map[string]http.Handler{}, map[string]http.Handler{}
	for path, h := range rec.hooks {
		if path == ConversionPath {
			continue
		}
		g := h.(guarded)
		a := g.next.(admissionReviews)
		require.NotNil(t, a.webhook, "%s: AdmissionReviews does not serve controller-runtime's webhook itself", path)
		served[path] = h
		g.next = admissionReviews{log: a.log, next: a.next}
		decodedTwice[path] = g
	}
	return served, decodedTwice
}

// answer is what a client gets for a request: status, headers and the decoded review, its
// JSON patch sorted by path (controller-runtime's patch comes in no fixed order).
type answer struct {
	Code   int
	Header http.Header
	Review map[string]any
}

func answerOf(t *testing.T, h http.Handler, path, contentType string, body []byte) answer {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	a := answer{Code: rec.Code, Header: rec.Header()}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a.Review), "%s: %s", path, rec.Body.String())
	if resp, ok := a.Review["response"].(map[string]any); ok {
		if patch, ok := resp["patch"].(string); ok {
			decoded, err := base64.StdEncoding.DecodeString(patch)
			require.NoError(t, err)
			var ops []map[string]any
			require.NoError(t, json.Unmarshal(decoded, &ops))
			slices.SortFunc(ops, func(x, y map[string]any) int { return strings.Compare(x["path"].(string), y["path"].(string)) })
			resp["patch"] = ops
		}
	}
	return a
}

// reshaped is review body with its top-level fields changed: set (nil removes one).
func reshaped(t *testing.T, body []byte, set map[string]any) []byte {
	t.Helper()
	var fields map[string]any
	require.NoError(t, json.Unmarshal(body, &fields))
	for k, v := range set {
		if v == nil {
			delete(fields, k)
			continue
		}
		fields[k] = v
	}
	return mustJSON(t, fields)
}

// AdmissionReviews decodes a review once and hands controller-runtime's webhook the decoded
// request: every answer, valid or not, is the one controller-runtime's own decoding gave.
func TestOneDecodeAnswersAsControllerRuntime(t *testing.T) {
	served, decodedTwice := registeredHooks(t)
	type request struct {
		name, path, contentType string
		body                    []byte
	}
	var requests []request
	add := func(name, path string, body []byte) {
		requests = append(requests, request{name, path, "application/json", body})
	}
	for _, tc := range handlerCases(t) {
		add(tc.name+"/valid", tc.path, tc.valid)
		if tc.invalid != nil {
			add(tc.name+"/invalid", tc.path, tc.invalid)
		}
	}
	const mutate = "/mutate-nvidia-com-v1alpha1-dynamographdeployment"
	create := review(t, admissionv1.Create, gvkDGD, "dynamographdeployments", validDGD(), nil)
	add("create", mutate, create)
	add("v1beta1 review", mutate, reshaped(t, create, map[string]any{"apiVersion": "admission.k8s.io/v1beta1"}))
	add("review without apiVersion and kind", mutate, reshaped(t, create, map[string]any{"apiVersion": nil, "kind": nil}))
	add("review with an unknown field", mutate, reshaped(t, create, map[string]any{"extra": 1}))
	add("review with a response", mutate, reshaped(t, create, map[string]any{"response": map[string]any{"uid": "x", "allowed": true}}))
	add("review without a request", mutate, reshaped(t, create, map[string]any{"request": nil}))
	add("field named in another case", mutate, []byte(strings.Replace(string(create), `"kind":"AdmissionReview"`, `"kind":"AdmissionReview","Kind":"Pod"`, 1)))
	add("field twice", mutate, []byte(strings.Replace(string(create), `"kind":"AdmissionReview"`, `"kind":"AdmissionReview","kind":"AdmissionReview"`, 1)))
	add("operation named in another case", mutate, []byte(strings.Replace(string(create), `"operation":"CREATE"`, `"operation":"CREATE","Operation":"EXPLODE"`, 1)))
	add("request without an operation", mutate, []byte(strings.Replace(string(create), `"operation":"CREATE",`, ``, 1)))
	add("uid of the wrong type", mutate, []byte(strings.Replace(string(create), `"uid":"3f0c1b0e-6f25-4d2a-9a61-8f1d3f2c7a10"`, `"uid":7`, 1)))
	for _, op := range []admissionv1.Operation{admissionv1.Update, admissionv1.Delete, admissionv1.Connect} {
		body := review(t, op, gvkDGD, "dynamographdeployments", validDGD(), validDGD())
		add(string(op), mutate, body)
		add(string(op)+" validated", "/validate-nvidia-com-v1alpha1-dynamographdeployment", body)
	}
	requests = append(requests, request{"content type with a charset", mutate, "application/json; charset=utf-8", create})

	for _, r := range requests {
		t.Run(r.name, func(t *testing.T) {
			want := answerOf(t, decodedTwice[r.path], r.path, r.contentType, r.body)
			got := answerOf(t, served[r.path], r.path, r.contentType, r.body)
			assert.Equal(t, want, got)
		})
	}
}

// A review the one-decode path does not take keeps the envelope's checks: a field named in
// another case is the field, as before.
func TestFieldsNamedInAnotherCaseAreStillChecked(t *testing.T) {
	served, _ := registeredHooks(t)
	const path = "/validate-nvidia-com-v1alpha1-dynamographdeployment"
	create := string(review(t, admissionv1.Create, gvkDGD, "dynamographdeployments", validDGD(), nil))
	for body, want := range map[string]string{
		strings.Replace(create, `"kind":"AdmissionReview"`, `"kind":"AdmissionReview","Kind":"Pod"`, 1):  `got kind "Pod"`,
		strings.Replace(create, `"operation":"CREATE"`, `"operation":"CREATE","Operation":"EXPLODE"`, 1): `unknown operation "EXPLODE"`,
	} {
		_, out := post(t, served[path], path, []byte(body))
		require.NotNil(t, out.Response)
		assert.False(t, out.Response.Allowed)
		require.NotNil(t, out.Response.Result)
		assert.EqualValues(t, http.StatusBadRequest, out.Response.Result.Code)
		assert.Contains(t, out.Response.Result.Message, want)
	}
}

// The logger controller-runtime logs a request's failures on carries what its builder's
// default gives it: the webhook's kind and the request's object, resource, user and uid.
func TestRequestLoggerNamesTheRequest(t *testing.T) {
	lines := &logLines{}
	req := &admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "3f0c", Namespace: "team-a", Name: "my-graph", UserInfo: authenticationv1.UserInfo{Username: "alice"},
		Resource: metav1.GroupVersionResource{Group: "nvidia.com", Version: "v1alpha1", Resource: "dynamographdeployments"},
	}}
	requestLogger(schema.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "DynamoGraphDeployment"})(lines.logger(), req).
		Error(errors.New("boom"), "unable to encode response")
	got := lines.find("unable to encode response")
	require.Len(t, got, 1)
	assert.Equal(t, map[string]any{
		"logger": "", "msg": "unable to encode response", "error": "boom",
		"webhookGroup": "nvidia.com", "webhookKind": "DynamoGraphDeployment",
		"DynamoGraphDeployment": map[string]any{"name": "my-graph", "namespace": "team-a"},
		"namespace":             "team-a", "name": "my-graph", "user": "alice", "requestID": "3f0c",
		"resource": map[string]any{"group": "nvidia.com", "version": "v1alpha1", "resource": "dynamographdeployments"},
	}, got[0])
}

// brokenWriter is a client gone before its answer: every write fails.
type brokenWriter struct{ header http.Header }

func (w *brokenWriter) Header() http.Header       { return w.header }
func (w *brokenWriter) Write([]byte) (int, error) { return 0, errors.New("write: broken pipe") }
func (w *brokenWriter) WriteHeader(int)           {}

// The one-decode path logs what controller-runtime's admission.Webhook logs: at level 5 the
// request (with its request logger's fields) and the answer; at any level a response it could
// not write. No e2e suite sees these lines: the chart logs at info, and a client must leave
// exactly while its answer is written.
func TestOneDecodeLogsAsControllerRuntime(t *testing.T) {
	served, _ := registeredHooks(t)
	const mutate = "/mutate-nvidia-com-v1alpha1-dynamographdeployment"
	a := served[mutate].(guarded).next.(admissionReviews)
	body := review(t, admissionv1.Create, gvkDGD, "dynamographdeployments", validDGD(), nil)
	post := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, mutate, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return r
	}

	var lines logLines
	a.webhookLog = lines.loggerAt(5)
	a.ServeHTTP(httptest.NewRecorder(), post())
	const uid = "3f0c1b0e-6f25-4d2a-9a61-8f1d3f2c7a10"
	if received := lines.find("received request"); assert.Len(t, received, 1, "%v", lines.lines) {
		assert.Equal(t, uid, received[0]["requestID"], "the request logger's fields")
		assert.Contains(t, received[0], "user")
	}
	if wrote := lines.find("wrote response"); assert.Len(t, wrote, 1, "%v", lines.lines) {
		assert.Equal(t, uid, wrote[0]["requestID"])
		assert.Equal(t, true, wrote[0]["allowed"])
	}

	var broken logLines
	a.webhookLog = broken.logger()
	a.ServeHTTP(&brokenWriter{header: http.Header{}}, post())
	if failed := broken.find("unable to encode and write the response"); assert.Len(t, failed, 1, "%v", broken.lines) {
		assert.Equal(t, "write: broken pipe", failed[0]["error"])
	}
	assert.Len(t, broken.find("still unable to encode and write the InternalServerError response"), 1, "%v", broken.lines)
	assert.Empty(t, broken.find("wrote response"), "a level-5 line at level 0")
}
