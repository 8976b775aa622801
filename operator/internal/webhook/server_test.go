package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/scheme"
)

const (
	testOperatorVersion = "v1.2.3"
	testDGDRImage       = "nvcr.io/dynamo/profiler:test"
)

// servedMux registers every webhook on a manager that never starts and returns the
// webhook server's handler: requests go through controller-runtime's real decoding path.
func servedMux(tb testing.TB) http.Handler {
	return servedMuxWith(tb, Config{OperatorVersion: testOperatorVersion, DefaultDGDRImage: testDGDRImage})
}

// servedMuxWith is servedMux with the webhooks configured as cfg.
func servedMuxWith(tb testing.TB, cfg Config) http.Handler {
	tb.Helper()
	return servedMuxLogging(tb, cfg, logr.Discard())
}

// servedMuxLogging is servedMuxWith with the operator's webhook lines (Observed, LeaseAware)
// written to log.
func servedMuxLogging(tb testing.TB, cfg Config, log logr.Logger) http.Handler {
	tb.Helper()
	// controller-runtime's global logger buffers every record until SetLogger is called;
	// under fuzzing that is millions of records.
	ctrllog.SetLogger(logr.Discard())
	// The manager only needs a config to be built; nothing here talks to an apiserver.
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 log,
	})
	require.NoError(tb, err)
	require.NoError(tb, Register(mgr, cfg))
	return mgr.GetWebhookServer().WebhookMux()
}

// review encodes an AdmissionReview for obj (and old, for updates).
func review(tb testing.TB, op admissionv1.Operation, gvk metav1.GroupVersionKind, resource string, obj, old runtime.Object) []byte {
	tb.Helper()
	req := &admissionv1.AdmissionRequest{
		UID:       "3f0c1b0e-6f25-4d2a-9a61-8f1d3f2c7a10",
		Kind:      gvk,
		Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource},
		Namespace: "team-a",
		Operation: op,
	}
	if obj != nil {
		req.Object = runtime.RawExtension{Raw: mustJSON(tb, obj)}
	}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustJSON(tb, old)}
	}
	return mustJSON(tb, &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	require.NoError(tb, err)
	return b
}

// post sends body to path and decodes the AdmissionReview answer.
func post(tb testing.TB, h http.Handler, path string, body []byte) (*httptest.ResponseRecorder, *admissionv1.AdmissionReview) {
	tb.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	if rec.Code == http.StatusOK {
		require.NoError(tb, json.Unmarshal(rec.Body.Bytes(), &out), "response body: %s", rec.Body.String())
	}
	return rec, &out
}

var (
	gvkDCD   = metav1.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "DynamoComponentDeployment"}
	gvkDGD   = metav1.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "DynamoGraphDeployment"}
	gvkModel = metav1.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "DynamoModel"}
	gvkDGDR  = metav1.GroupVersionKind{Group: "nvidia.com", Version: "v1beta1", Kind: "DynamoGraphDeploymentRequest"}
)

func validDCD() *v1alpha1.DynamoComponentDeployment {
	return &v1alpha1.DynamoComponentDeployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoComponentDeployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "decode"},
		Spec: v1alpha1.DynamoComponentDeploymentSpec{
			BackendFramework:                    "vllm",
			DynamoComponentDeploymentSharedSpec: v1alpha1.DynamoComponentDeploymentSharedSpec{Replicas: ptr.To[int32](1)},
		},
	}
}

func validDGD() *v1alpha1.DynamoGraphDeployment {
	return &v1alpha1.DynamoGraphDeployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "my-graph"},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{
			BackendFramework: "vllm",
			Services:         map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"decode": {Replicas: ptr.To[int32](1)}},
		},
	}
}

func validModel() *v1alpha1.DynamoModel {
	return &v1alpha1.DynamoModel{
		TypeMeta:   metav1.TypeMeta{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoModel"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "llama"},
		Spec:       v1alpha1.DynamoModelSpec{ModelName: "llama", BaseModelName: "meta-llama/Llama-3-8B", ModelType: v1alpha1.ModelTypeBase},
	}
}

func validDGDR() *v1beta1.DynamoGraphDeploymentRequest {
	return &v1beta1.DynamoGraphDeploymentRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeploymentRequest"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "profile"},
		Spec: v1beta1.DynamoGraphDeploymentRequestSpec{
			Model: "meta-llama/Llama-3-8B", Backend: v1beta1.BackendVLLM, SearchStrategy: v1beta1.SearchStrategyThorough,
		},
	}
}

// handlerCase is one served admission path with a valid and an invalid review.
type handlerCase struct {
	name        string
	path        string
	valid       []byte
	invalid     []byte
	wantMessage string
}

func handlerCases(tb testing.TB) []handlerCase {
	noServices := validDGD()
	noServices.Spec.Services = nil
	negative := validDCD()
	negative.Spec.Replicas = ptr.To[int32](-1)
	lora := validModel()
	lora.Spec.ModelType = v1alpha1.ModelTypeLoRA
	auto := validDGDR()
	auto.Spec.Backend = v1beta1.BackendAuto
	renamed := validDGD()
	renamed.Spec.Services = map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"worker": {}}
	return []handlerCase{
		{
			name:        "A1/validate DynamoComponentDeployment create",
			path:        "/validate-nvidia-com-v1alpha1-dynamocomponentdeployment",
			valid:       review(tb, admissionv1.Create, gvkDCD, "dynamocomponentdeployments", validDCD(), nil),
			invalid:     review(tb, admissionv1.Create, gvkDCD, "dynamocomponentdeployments", negative, nil),
			wantMessage: "DynamoComponentDeployment team-a/decode is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0",
		},
		{
			name:        "A2/validate DynamoGraphDeployment create",
			path:        "/validate-nvidia-com-v1alpha1-dynamographdeployment",
			valid:       review(tb, admissionv1.Create, gvkDGD, "dynamographdeployments", validDGD(), nil),
			invalid:     review(tb, admissionv1.Create, gvkDGD, "dynamographdeployments", noServices, nil),
			wantMessage: "DynamoGraphDeployment team-a/my-graph is invalid: spec.services: Required value: at least one service is required",
		},
		{
			name:        "A3/validate DynamoGraphDeployment update",
			path:        "/validate-nvidia-com-v1alpha1-dynamographdeployment",
			valid:       review(tb, admissionv1.Update, gvkDGD, "dynamographdeployments", validDGD(), validDGD()),
			invalid:     review(tb, admissionv1.Update, gvkDGD, "dynamographdeployments", renamed, validDGD()),
			wantMessage: "DynamoGraphDeployment team-a/my-graph is invalid: spec.services: Forbidden: services cannot be added after creation; added: worker; spec.services: Forbidden: services cannot be removed after creation; removed: decode",
		},
		{
			name:        "A5/validate DynamoModel create",
			path:        "/validate-nvidia-com-v1alpha1-dynamomodel",
			valid:       review(tb, admissionv1.Create, gvkModel, "dynamomodels", validModel(), nil),
			invalid:     review(tb, admissionv1.Create, gvkModel, "dynamomodels", lora, nil),
			wantMessage: "DynamoModel team-a/llama is invalid: spec.source.uri: Required value: required for lora models",
		},
		{
			name:    "A6/validate DynamoGraphDeploymentRequest create",
			path:    "/validate-nvidia-com-v1beta1-dynamographdeploymentrequest",
			valid:   review(tb, admissionv1.Create, gvkDGDR, "dynamographdeploymentrequests", validDGDR(), nil),
			invalid: review(tb, admissionv1.Create, gvkDGDR, "dynamographdeploymentrequests", auto, nil),
			wantMessage: `DynamoGraphDeploymentRequest team-a/profile is invalid: spec.backend: Invalid value: "auto": ` +
				"a thorough search measures one backend on real hardware: name sglang, trtllm or vllm, or use searchStrategy rapid",
		},
		{
			name:  "A7/mutate DynamoGraphDeployment create",
			path:  "/mutate-nvidia-com-v1alpha1-dynamographdeployment",
			valid: review(tb, admissionv1.Create, gvkDGD, "dynamographdeployments", validDGD(), nil),
		},
		{
			name:  "A7/mutate DynamoGraphDeploymentRequest create",
			path:  "/mutate-nvidia-com-v1beta1-dynamographdeploymentrequest",
			valid: review(tb, admissionv1.Create, gvkDGDR, "dynamographdeploymentrequests", validDGDR(), nil),
		},
	}
}

func TestServedHandlers(t *testing.T) {
	mux := servedMux(t)
	for _, tc := range handlerCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			rec, out := post(t, mux, tc.path, tc.valid)
			require.Equal(t, http.StatusOK, rec.Code)
			require.NotNil(t, out.Response)
			assert.True(t, out.Response.Allowed, "valid object denied: %+v", out.Response.Result)
			assert.EqualValues(t, "3f0c1b0e-6f25-4d2a-9a61-8f1d3f2c7a10", out.Response.UID)
			if tc.invalid == nil {
				return
			}
			_, out = post(t, mux, tc.path, tc.invalid)
			require.NotNil(t, out.Response)
			require.False(t, out.Response.Allowed)
			require.NotNil(t, out.Response.Result)
			assert.EqualValues(t, http.StatusUnprocessableEntity, out.Response.Result.Code)
			assert.Equal(t, metav1.StatusReasonInvalid, out.Response.Result.Reason)
			assert.Equal(t, tc.wantMessage, out.Response.Result.Message)
			require.NotNil(t, out.Response.Result.Details)
			assert.NotEmpty(t, out.Response.Result.Details.Causes)
		})
	}

	t.Run("A7/mutate-nvidia-com-v1alpha1-dynamographdeployment patches the origin version", func(t *testing.T) {
		_, out := post(t, mux, "/mutate-nvidia-com-v1alpha1-dynamographdeployment",
			review(t, admissionv1.Create, gvkDGD, "dynamographdeployments", validDGD(), nil))
		require.True(t, out.Response.Allowed)
		assert.JSONEq(t, `[{"op":"add","path":"/metadata/annotations","value":{"nvidia.com/dynamo-operator-origin-version":"v1.2.3"}}]`,
			string(out.Response.Patch))
	})

	t.Run("A7/mutate-nvidia-com-v1beta1-dynamographdeploymentrequest patches the default image", func(t *testing.T) {
		_, out := post(t, mux, "/mutate-nvidia-com-v1beta1-dynamographdeploymentrequest",
			review(t, admissionv1.Create, gvkDGDR, "dynamographdeploymentrequests", validDGDR(), nil))
		require.True(t, out.Response.Allowed)
		assert.JSONEq(t, `[{"op":"add","path":"/spec/image","value":"nvcr.io/dynamo/profiler:test"}]`, string(out.Response.Patch))
	})

	t.Run("A8/convert answers ConversionReviews", func(t *testing.T) {
		alpha := &v1alpha1.DynamoGraphDeploymentRequest{
			TypeMeta:   metav1.TypeMeta{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeploymentRequest"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "profile"},
			Spec: v1alpha1.DynamoGraphDeploymentRequestSpec{
				Backend:         "vllm",
				ProfilingConfig: &v1alpha1.ProfilingConfig{ProfilerImage: "img:1", UseAIConfigurator: ptr.To(false)},
				SLA:             &v1alpha1.SLA{TTFT: 200},
			},
			Status: v1alpha1.DynamoGraphDeploymentRequestStatus{State: "Deployed"},
		}
		body := mustJSON(t, &apiextensionsv1.ConversionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
			Request: &apiextensionsv1.ConversionRequest{
				UID: "c-1", DesiredAPIVersion: "nvidia.com/v1beta1",
				Objects: []runtime.RawExtension{{Raw: mustJSON(t, alpha)}},
			},
		})
		req := httptest.NewRequest(http.MethodPost, ConversionPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		var out apiextensionsv1.ConversionReview
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		require.Equal(t, metav1.StatusSuccess, out.Response.Result.Status, out.Response.Result.Message)
		require.Len(t, out.Response.ConvertedObjects, 1)
		var beta v1beta1.DynamoGraphDeploymentRequest
		require.NoError(t, json.Unmarshal(out.Response.ConvertedObjects[0].Raw, &beta))
		assert.Equal(t, "nvidia.com/v1beta1", beta.APIVersion)
		assert.Equal(t, v1beta1.DynamoGraphDeploymentRequestSpec{
			Backend: v1beta1.BackendVLLM, Image: "img:1", SearchStrategy: v1beta1.SearchStrategyThorough,
			SLA: &v1beta1.SLA{TTFTMilliseconds: 200},
		}, beta.Spec)
		assert.Equal(t, v1beta1.PhaseDeployed, beta.Status.Phase)
	})
}

// TestManifestsMatchRegistration keeps the generated manifests (from the markers) and
// Register in step: every webhook in the chart's manifests is served, with the conventions
// the chart relies on.
func TestManifestsMatchRegistration(t *testing.T) {
	mux := servedMux(t)
	const path = "../../../charts/dynamo-operator/files/webhook/manifests.yaml"
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }() // read only

	type hook struct {
		name, path string
		mutating   bool
		rules      []admissionregistrationv1.RuleWithOperations
	}
	var hooks []hook
	check := func(name string, cc admissionregistrationv1.WebhookClientConfig, fp *admissionregistrationv1.FailurePolicyType,
		se *admissionregistrationv1.SideEffectClass, mp *admissionregistrationv1.MatchPolicyType, versions []string) {
		assert.Equal(t, admissionregistrationv1.Fail, *fp, name)
		assert.Equal(t, admissionregistrationv1.SideEffectClassNone, *se, name)
		assert.Equal(t, admissionregistrationv1.Equivalent, *mp, name)
		assert.Equal(t, []string{"v1"}, versions, name)
		require.NotNil(t, cc.Service, name)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var doc struct {
			Kind     string                                    `json:"kind"`
			Webhooks []admissionregistrationv1.MutatingWebhook `json:"webhooks"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err, "decoding %s", path)
		}
		for _, w := range doc.Webhooks {
			check(w.Name, w.ClientConfig, w.FailurePolicy, w.SideEffects, w.MatchPolicy, w.AdmissionReviewVersions)
			hooks = append(hooks, hook{name: w.Name, path: *w.ClientConfig.Service.Path,
				mutating: doc.Kind == "MutatingWebhookConfiguration", rules: w.Rules})
		}
	}

	var paths []string
	for _, h := range hooks {
		paths = append(paths, h.path)
		require.Len(t, h.rules, 1, h.name)
		r := h.rules[0]
		kind := strings.TrimSuffix(r.Resources[0], "s")
		prefix, action := "v", "validate"
		if h.mutating {
			prefix, action = "m", "mutate"
		}
		assert.Equal(t, prefix+kind+".nvidia.com", h.name)
		assert.Equal(t, "/"+action+"-nvidia-com-"+r.APIVersions[0]+"-"+kind, h.path)
		assert.Equal(t, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, r.Operations)

		// Served: a request gets an AdmissionReview back, not the mux's 404.
		rec, out := post(t, mux, h.path, []byte(`{}`))
		assert.Equal(t, http.StatusOK, rec.Code, h.path)
		assert.NotNil(t, out.Response, h.path)
	}
	assert.ElementsMatch(t, []string{
		"/validate-nvidia-com-v1alpha1-dynamocomponentdeployment",
		"/validate-nvidia-com-v1alpha1-dynamographdeployment",
		"/validate-nvidia-com-v1alpha1-dynamomodel",
		"/validate-nvidia-com-v1beta1-dynamographdeploymentrequest",
		"/mutate-nvidia-com-v1alpha1-dynamographdeployment",
		"/mutate-nvidia-com-v1beta1-dynamographdeploymentrequest",
	}, paths)
}

func TestRegisterNeedsEveryKindInTheScheme(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Logger: logr.Discard(),
	})
	require.NoError(t, err)
	err = Register(mgr, Config{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "registering a validating webhook for *v1beta1.DynamoGraphDeploymentRequest")
}
