package webhook

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// servePlain serves h on a loopback listener with the webhook server's HTTP settings
// (controller-runtime's: 32 s for the headers, no read timeout of its own) and returns its
// address. Plain HTTP: what is tested here happens after TLS.
func servePlain(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 32 * time.Second, MaxHeaderBytes: 1 << 20}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// exchange sends one raw HTTP/1.1 request to addr, writing body with write (nil: none), and
// reads the answer while the body is still being written, as a client that streams does.
func exchange(t *testing.T, addr, method, path, contentType string, contentLength int, write func(io.Writer) error) (*http.Response, string, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: webhook\r\n", method, path)
	if contentType != "" {
		head += "Content-Type: " + contentType + "\r\n"
	}
	if contentLength >= 0 {
		head += fmt.Sprintf("Content-Length: %d\r\n", contentLength)
	}
	start := time.Now()
	_, err = io.WriteString(conn, head+"\r\n")
	require.NoError(t, err)
	if write != nil {
		go func() { _ = write(conn) }()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "%s %s: no answer", method, path)
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp, string(body), time.Since(start)
}

func bodyOf(b []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(b); return err }
}

// servedPaths are every path Register serves.
var servedPaths = []string{
	"/validate-nvidia-com-v1alpha1-dynamocomponentdeployment",
	"/validate-nvidia-com-v1alpha1-dynamographdeployment",
	"/validate-nvidia-com-v1alpha1-dynamomodel",
	"/validate-nvidia-com-v1beta1-dynamographdeploymentrequest",
	"/mutate-nvidia-com-v1alpha1-dynamographdeployment",
	"/mutate-nvidia-com-v1beta1-dynamographdeploymentrequest",
	ConversionPath,
}

func TestEveryPathAcceptsOnlyPOSTOfJSON(t *testing.T) {
	addr := servePlain(t, servedMux(t))
	review := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)
	for _, path := range servedPaths {
		for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions} {
			t.Run(method+" "+path, func(t *testing.T) {
				resp, answer, _ := exchange(t, addr, method, path, "application/json", len(review), bodyOf(review))
				assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, answer)
				assert.Equal(t, http.MethodPost, resp.Header.Get("Allow"))
				if method != http.MethodHead {
					assert.Equal(t, "method "+method+" not allowed: "+path+" accepts POST\n", answer)
				}
			})
		}
		for _, ct := range []string{"", "text/plain", "application/yaml", "application/x-www-form-urlencoded", "application/json-patch+json", "application/json;;"} {
			t.Run("Content-Type "+ct+" "+path, func(t *testing.T) {
				resp, answer, _ := exchange(t, addr, http.MethodPost, path, ct, len(review), bodyOf(review))
				assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, answer)
				assert.Equal(t, fmt.Sprintf("Content-Type %q not supported: %s accepts application/json\n", ct, path), answer)
			})
		}
	}
	// A charset parameter is still JSON: the request reaches the handler.
	resp, answer, _ := exchange(t, addr, http.MethodPost, servedPaths[1], "application/json; charset=utf-8", len(review), bodyOf(review))
	assert.Equal(t, http.StatusOK, resp.StatusCode, answer)
}

func TestConvertRefusesWhatIsNotAConversionReview(t *testing.T) {
	addr := servePlain(t, servedMux(t))
	for _, tc := range []struct{ name, body, want string }{
		{"empty", ``, "request body is empty: expected a ConversionReview"},
		{"blank", "  \n", "request body is empty: expected a ConversionReview"},
		{"truncated", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionRev`, "decoding the ConversionReview: unexpected end of JSON input"},
		{"not JSON", `<xml/>`, "decoding the ConversionReview: invalid character '<'"},
		{"an array", `[]`, "decoding the ConversionReview: expected a JSON object, got array"},
		{"deeply nested", strings.Repeat(`{"a":`, 20000) + `1` + strings.Repeat(`}`, 20000), "decoding the ConversionReview: invalid character '{' exceeded max depth"},
		{"an AdmissionReview", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}`,
			`expected a ConversionReview of apiextensions.k8s.io/v1, got kind "AdmissionReview" of apiVersion "admission.k8s.io/v1"`},
		{"v1beta1", `{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","request":{"uid":"u"}}`,
			`expected a ConversionReview of apiextensions.k8s.io/v1, got kind "ConversionReview" of apiVersion "apiextensions.k8s.io/v1beta1"`},
		{"another kind of the right version", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","request":{"uid":"u"}}`,
			`expected a ConversionReview of apiextensions.k8s.io/v1, got kind "CustomResourceDefinition" of apiVersion "apiextensions.k8s.io/v1"`},
		{"a kind without a version", `{"kind":"ConversionReview","request":{"uid":"u"}}`, `expected a ConversionReview of apiextensions.k8s.io/v1, got kind "ConversionReview" of apiVersion ""`},
		{"no request", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, "the ConversionReview has no request"},
		{"null request", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":null}`, "the ConversionReview has no request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, answer, _ := exchange(t, addr, http.MethodPost, ConversionPath, "application/json", len(tc.body), bodyOf([]byte(tc.body)))
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, answer)
			assert.True(t, strings.HasPrefix(answer, tc.want), "answer %q does not start with %q", answer, tc.want)
		})
	}

	t.Run("a ConversionReview asking for a version nobody serves is answered inside the review", func(t *testing.T) {
		body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"nvidia.com/v9","objects":[{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeploymentRequest","metadata":{"name":"x"}}]}}`
		resp, answer, _ := exchange(t, addr, http.MethodPost, ConversionPath, "application/json", len(body), bodyOf([]byte(body)))
		require.Equal(t, http.StatusOK, resp.StatusCode, answer)
		var out apiextensionsv1.ConversionReview
		require.NoError(t, json.Unmarshal([]byte(answer), &out))
		require.NotNil(t, out.Response)
		assert.Equal(t, metav1.StatusFailure, out.Response.Result.Status)
		assert.Contains(t, out.Response.Result.Message, "nvidia.com/v9")
	})
}

// A client that sends its headers and then trickles its body is cut off once the body timeout
// passes: the handler's read fails saying so, the answer says so, and the connection closes.
func TestSlowBodiesAreCutOff(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr := servePlain(t, servedMuxWith(t, Config{OperatorVersion: testOperatorVersion, BodyReadTimeout: timeout}))
	trickle := func(w io.Writer) error {
		for {
			if _, err := w.Write([]byte{' '}); err != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, path := range servedPaths {
		t.Run(path, func(t *testing.T) {
			resp, answer, took := exchange(t, addr, http.MethodPost, path, "application/json", 10000, trickle)
			assert.Less(t, took, timeout+2*time.Second, "answered after %s", took)
			assert.Contains(t, answer, "request body not received within 300ms")
			assert.True(t, resp.Close, "the connection is kept open after a cut-off body")
			if path == ConversionPath {
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode, answer)
				return
			}
			// The admission handlers answer a body they could not read inside the review.
			var out admissionv1.AdmissionReview
			require.NoError(t, json.Unmarshal([]byte(answer), &out), answer)
			require.NotNil(t, out.Response)
			assert.EqualValues(t, http.StatusBadRequest, out.Response.Result.Code)
		})
	}

	t.Run("the bound is lifted once the body is in: a slow handler is not cancelled", func(t *testing.T) {
		addr := servePlain(t, servedMuxWith(t, Config{OperatorVersion: testOperatorVersion, BodyReadTimeout: timeout, LatencyInjection: 3 * timeout}))
		body := review(t, admissionv1.Create, gvkDGD, "dynamographdeployments", validDGD(), nil)
		resp, answer, took := exchange(t, addr, http.MethodPost, "/validate-nvidia-com-v1alpha1-dynamographdeployment", "application/json", len(body), bodyOf(body))
		require.Equal(t, http.StatusOK, resp.StatusCode, answer)
		var out admissionv1.AdmissionReview
		require.NoError(t, json.Unmarshal([]byte(answer), &out), answer)
		require.NotNil(t, out.Response)
		assert.True(t, out.Response.Allowed, "denied after %s: %+v", took, out.Response.Result)
		assert.GreaterOrEqual(t, took, 3*timeout)
	})
}

// The guard is on every path: a valid review still goes through, by POST of JSON.
func TestGuardedPathsServeValidReviews(t *testing.T) {
	addr := servePlain(t, servedMux(t))
	for _, tc := range handlerCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			resp, answer, _ := exchange(t, addr, http.MethodPost, tc.path, "application/json", len(tc.valid), bodyOf(tc.valid))
			require.Equal(t, http.StatusOK, resp.StatusCode, answer)
			var out admissionv1.AdmissionReview
			require.NoError(t, json.Unmarshal([]byte(answer), &out))
			require.NotNil(t, out.Response)
			assert.True(t, out.Response.Allowed, "%+v", out.Response.Result)
		})
	}
	t.Run("A8/convert", func(t *testing.T) {
		body := conversionReview(t, "nvidia.com/v1beta1", &v1alpha1.DynamoGraphDeploymentRequest{
			TypeMeta:   metav1.TypeMeta{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeploymentRequest"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "profile"},
			Spec:       v1alpha1.DynamoGraphDeploymentRequestSpec{Backend: "vllm"},
		})
		resp, answer, _ := exchange(t, addr, http.MethodPost, ConversionPath, "application/json", len(body), bodyOf(body))
		require.Equal(t, http.StatusOK, resp.StatusCode, answer)
		var out apiextensionsv1.ConversionReview
		require.NoError(t, json.Unmarshal([]byte(answer), &out))
		require.NotNil(t, out.Response)
		assert.Equal(t, metav1.StatusSuccess, out.Response.Result.Status, out.Response.Result.Message)
		assert.Len(t, out.Response.ConvertedObjects, 1)
	})
}

// conversionReview is the ConversionReview the API server sends to convert objs.
func conversionReview(tb testing.TB, desired string, objs ...runtime.Object) []byte {
	tb.Helper()
	req := &apiextensionsv1.ConversionRequest{UID: "c", DesiredAPIVersion: desired}
	for _, o := range objs {
		req.Objects = append(req.Objects, runtime.RawExtension{Raw: mustJSON(tb, o)})
	}
	return mustJSON(tb, &apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  req,
	})
}

// What anyone may send to an admission path is answered, as controller-runtime answers what
// it cannot decode, with 200 and an AdmissionReview that denies it with a 4xx code and a
// message saying what was wrong.
func TestAdmissionPathsAnswerHostileBodiesInAReview(t *testing.T) {
	addr := servePlain(t, servedMux(t))
	const nested = 20000
	for _, tc := range []struct{ name, body, want string }{
		{"empty", ``, "request body is empty"},
		{"truncated", `{"apiVersion":"admission.k8s.io/v1","kind":"Admission`, "decoding the AdmissionReview: unexpected end of JSON input"},
		{"deeply nested object", strings.Repeat(`{"a":`, nested) + `1` + strings.Repeat(`}`, nested), "exceeded max depth"},
		{"deeply nested array", strings.Repeat(`[`, nested) + strings.Repeat(`]`, nested), "exceeded max depth"},
		{"whitespace", " \n\t ", "request body is empty"},
		{"not JSON", "\x00\xff{", "decoding the AdmissionReview: invalid character"},
		{"an array", `[{"kind":"AdmissionReview"}]`, "decoding the AdmissionReview: expected a JSON object, got array"},
		{"a string", `"AdmissionReview"`, "decoding the AdmissionReview: expected a JSON object, got string"},
		{"a ConversionReview", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u"}}`,
			`expected an AdmissionReview of admission.k8s.io/v1, got kind "ConversionReview" of apiVersion "apiextensions.k8s.io/v1"`},
		{"an AdmissionReview of v2", `{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE"}}`,
			`expected an AdmissionReview of admission.k8s.io/v1, got kind "AdmissionReview" of apiVersion "admission.k8s.io/v2"`},
		{"a Pod", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`, `expected an AdmissionReview of admission.k8s.io/v1, got kind "Pod" of apiVersion "v1"`},
		{"a review of a Pod", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","kind":{"group":"","version":"v1","kind":"Pod"},"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}}}`,
			"unable to decode /v1, Kind=Pod into"},
		{"a review without a request", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "the AdmissionReview has no request"},
		{"a review without an operation", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment","metadata":{"name":"p"}}}}`,
			`unknown operation ""`},
		{"a review of an unknown operation", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"EXPLODE","object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment","metadata":{"name":"p"}}}}`,
			`unknown operation "EXPLODE"`},
		{"a review of an unknown version", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","object":{"apiVersion":"nvidia.com/v9","kind":"DynamoGraphDeployment","metadata":{"name":"p"}}}}`,
			`no kind "DynamoGraphDeployment" is registered for version "nvidia.com/v9"`},
	} {
		for _, path := range servedPaths[:len(servedPaths)-1] {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				resp, answer, _ := exchange(t, addr, http.MethodPost, path, "application/json", len(tc.body), bodyOf([]byte(tc.body)))
				require.Equal(t, http.StatusOK, resp.StatusCode, answer)
				var out admissionv1.AdmissionReview
				require.NoError(t, json.Unmarshal([]byte(answer), &out), answer)
				require.NotNil(t, out.Response, answer)
				assert.False(t, out.Response.Allowed)
				require.NotNil(t, out.Response.Result, answer)
				assert.EqualValues(t, http.StatusBadRequest, out.Response.Result.Code, answer)
				assert.Contains(t, out.Response.Result.Message, tc.want)
			})
		}
	}
}
