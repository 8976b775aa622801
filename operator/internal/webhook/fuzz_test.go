package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// The fuzz targets POST arbitrary bytes to each served path through controller-runtime's real
// decoding, exactly as the apiserver (or anyone reaching the port) would. Without -fuzz they
// run their seeds as ordinary tests. One target per path so each can be fuzzed on its own:
//
//	go test ./internal/webhook -run='^$' -fuzz=FuzzValidateGraph -fuzztime=10s

func FuzzValidateComponentDeployment(f *testing.F) {
	fuzzAdmission(f, "/validate-nvidia-com-v1alpha1-dynamocomponentdeployment")
}

func FuzzValidateGraph(f *testing.F) {
	fuzzAdmission(f, "/validate-nvidia-com-v1alpha1-dynamographdeployment")
}

func FuzzValidateModel(f *testing.F) {
	fuzzAdmission(f, "/validate-nvidia-com-v1alpha1-dynamomodel")
}

func FuzzValidateRequest(f *testing.F) {
	fuzzAdmission(f, "/validate-nvidia-com-v1beta1-dynamographdeploymentrequest")
}

func FuzzMutateGraph(f *testing.F) {
	fuzzAdmission(f, "/mutate-nvidia-com-v1alpha1-dynamographdeployment")
}

func FuzzMutateRequest(f *testing.F) {
	fuzzAdmission(f, "/mutate-nvidia-com-v1beta1-dynamographdeploymentrequest")
}

// malformedReviews are seeds every admission target starts from besides its valid reviews.
var malformedReviews = []string{
	``,
	`{`,
	`null`,
	`[]`,
	`{}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE"}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"UPDATE","object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment"}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","object":"text"}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod"}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"PATCH","object":{}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment","spec":{"services":{"a":null},"replicas":"x"}}}}`,
}

func fuzzAdmission(f *testing.F, path string) {
	mux := servedMux(f)
	seeded := 0
	for _, tc := range handlerCases(f) {
		if tc.path != path {
			continue
		}
		f.Add(tc.valid)
		if tc.invalid != nil {
			f.Add(tc.invalid)
		}
		seeded++
	}
	require.NotZero(f, seeded, "no valid review seeds for %s", path)
	for _, s := range malformedReviews {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		rec, out := post(t, mux, path, body)
		if rec.Code != http.StatusOK {
			require.True(t, rec.Code >= 400 && rec.Code < 500, "HTTP %d for %q", rec.Code, body)
			return
		}
		resp := out.Response
		require.NotNil(t, resp, "no response for %q", body)
		if resp.Allowed {
			return
		}
		require.NotNil(t, resp.Result, "denial without a status for %q", body)
		// A 5xx here is a recovered panic or an encoding failure: a bug, never the input's fault.
		require.True(t, resp.Result.Code >= 400 && resp.Result.Code < 500,
			"code %d (%s) for %q", resp.Result.Code, resp.Result.Message, body)
		require.NotEmpty(t, resp.Result.Message, "denial without a message for %q", body)
	})
}

func FuzzConvert(f *testing.F) {
	mux := servedMux(f)
	alpha := &v1alpha1.DynamoGraphDeploymentRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeploymentRequest"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "profile"},
		Spec:       v1alpha1.DynamoGraphDeploymentRequestSpec{Backend: "vllm", ProfilingConfig: &v1alpha1.ProfilingConfig{ProfilerImage: "img"}},
	}
	f.Add(mustJSON(f, &apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{UID: "c", DesiredAPIVersion: "nvidia.com/v1beta1",
			Objects: []runtime.RawExtension{{Raw: mustJSON(f, alpha)}}},
	}))
	f.Add([]byte(`{"request":{"uid":"c","desiredAPIVersion":"nvidia.com/v1alpha1","objects":[{"apiVersion":"nvidia.com/v1beta1","kind":"DynamoGraphDeploymentRequest","spec":{"searchStrategy":"odd"}}]}}`))
	f.Add([]byte(`{"request":{"uid":"c","desiredAPIVersion":"nvidia.com/v1alpha1","objects":[{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeploymentRequest","metadata":{"annotations":{"` + v1alpha1.DGDRConversionAnnotation + `":"{"}}}]}}`))
	f.Add([]byte(`{"request":{"uid":"c","desiredAPIVersion":"v1","objects":[{}]}}`))
	f.Add([]byte(`{`))

	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, ConversionPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			require.True(t, rec.Code >= 400 && rec.Code < 500, "HTTP %d for %q", rec.Code, body)
			return
		}
		var out apiextensionsv1.ConversionReview
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		require.NotNil(t, out.Response)
		if out.Response.Result.Status == metav1.StatusFailure {
			// controller-runtime reports a recovered panic with exactly this message.
			require.NotEqual(t, "internal error occurred during conversion", out.Response.Result.Message, "panic for %q", body)
			require.NotEmpty(t, out.Response.Result.Message)
		}
	})
}

// TestMalformedReviews pins what a client sees for broken requests: a 400 with a message
// that says what is wrong.
func TestMalformedReviews(t *testing.T) {
	mux := servedMux(t)
	const path = "/validate-nvidia-com-v1alpha1-dynamographdeployment"
	cases := []struct {
		name, body, want string
	}{
		{name: "A9/empty body", body: ``, want: "request body is empty"},
		{name: "A9/truncated JSON", body: `{`, want: "decoding the AdmissionReview: unexpected end of JSON input"},
		{name: "A9/no request", body: `{}`, want: "the AdmissionReview has no request"},
		{name: "A9/no operation", body: `{"request":{"uid":"u","object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment"}}}`, want: `unknown operation ""`},
		{
			name: "A9/update without an old object",
			body: `{"request":{"uid":"u","operation":"UPDATE","object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment"}}}`,
			want: "there is no content to decode",
		},
		{
			name: "A9/object of another kind",
			body: `{"request":{"uid":"u","operation":"CREATE","object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoModel"}}}`,
			want: "DynamoModel",
		},
		{
			name: "A9/wrongly typed field",
			body: `{"request":{"uid":"u","operation":"CREATE","object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment","spec":{"services":{"a":{"replicas":"x"}}}}}}`,
			want: "replicas",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, out := post(t, mux, path, []byte(tc.body))
			require.Equal(t, http.StatusOK, rec.Code)
			require.NotNil(t, out.Response)
			assert.False(t, out.Response.Allowed)
			require.NotNil(t, out.Response.Result)
			assert.EqualValues(t, http.StatusBadRequest, out.Response.Result.Code)
			assert.Contains(t, out.Response.Result.Message, tc.want)
		})
	}

	t.Run("A9/update with an undecodable old object is a 4xx on the mutating path too", func(t *testing.T) {
		body := review(t, admissionv1.Update, gvkDGDR, "dynamographdeploymentrequests", validDGDR(), nil)
		_, out := post(t, mux, "/mutate-nvidia-com-v1beta1-dynamographdeploymentrequest", body)
		require.NotNil(t, out.Response)
		assert.False(t, out.Response.Allowed)
		assert.EqualValues(t, http.StatusForbidden, out.Response.Result.Code)
		assert.Contains(t, out.Response.Result.Message, "decoding the old object")
	})
}
