package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

func reqCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// namespace creates a namespace for one test; names are unique per test so tests stay
// independent (envtest has no namespace controller, so namespaces are not cleaned up).
func namespace(t *testing.T, name string) string {
	t.Helper()
	require.NoError(t, k8s.Create(reqCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	return name
}

// requireWebhookDenied asserts the apiserver's error for a denial by the named webhook.
func requireWebhookDenied(t *testing.T, err error, webhookName, message string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, `admission webhook "`+webhookName+`" denied the request: `+message, err.Error())
}

// requireCELDenied asserts a rejection by the CRD's own validation rules (not a webhook).
func requireCELDenied(t *testing.T, err error, celMessage string) {
	t.Helper()
	require.Error(t, err)
	require.Contains(t, err.Error(), celMessage)
	require.NotContains(t, err.Error(), "admission webhook")
}

func dcd(ns, name string) *v1alpha1.DynamoComponentDeployment {
	return &v1alpha1.DynamoComponentDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.DynamoComponentDeploymentSpec{
			BackendFramework: "vllm",
			DynamoComponentDeploymentSharedSpec: v1alpha1.DynamoComponentDeploymentSharedSpec{
				ComponentType: "worker", Replicas: ptr.To[int32](1),
			},
		},
	}
}

func dgd(ns, name string) *v1alpha1.DynamoGraphDeployment {
	return &v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{
			BackendFramework: "vllm",
			Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
				"frontend": {ComponentType: "frontend", Replicas: ptr.To[int32](1)},
				"decode":   {ComponentType: "worker", Replicas: ptr.To[int32](2)},
			},
		},
	}
}

func model(ns, name string) *v1alpha1.DynamoModel {
	return &v1alpha1.DynamoModel{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.DynamoModelSpec{ModelName: "llama", BaseModelName: "meta-llama/Llama-3-8B", ModelType: v1alpha1.ModelTypeBase},
	}
}

func dgdr(ns, name string) *v1beta1.DynamoGraphDeploymentRequest {
	return &v1beta1.DynamoGraphDeploymentRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1beta1.DynamoGraphDeploymentRequestSpec{
			Model: "meta-llama/Llama-3-8B", Backend: v1beta1.BackendVLLM, Image: "nvcr.io/dynamo/profiler:1.0",
			SearchStrategy: v1beta1.SearchStrategyThorough, SLA: &v1beta1.SLA{TTFTMilliseconds: 200, ITLMilliseconds: 20},
		},
	}
}

// postReview sends an AdmissionReview straight to the operator's webhook server over the
// TLS endpoint the apiserver uses. Needed where the apiserver's own CEL rules reject a change
// before validating webhooks are called, to show the webhook enforces the same rule.
func postReview(t *testing.T, path string, op admissionv1.Operation, kind metav1.GroupVersionKind, obj, old runtime.Object) *admissionv1.AdmissionResponse {
	t.Helper()
	encode := func(o runtime.Object) runtime.RawExtension {
		raw, err := json.Marshal(o)
		require.NoError(t, err)
		return runtime.RawExtension{Raw: raw}
	}
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "direct-1", Kind: kind, Operation: op, Namespace: obj.(metav1.Object).GetNamespace(),
			Name: obj.(metav1.Object).GetName(), Object: encode(obj), OldObject: encode(old),
		},
	})
	require.NoError(t, err)

	wio := env.Environment.WebhookInstallOptions
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(wio.LocalServingCAData))
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	url := "https://" + net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort)) + path
	resp, err := httpClient.Post(url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }() // the decoded review is the result
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out admissionv1.AdmissionReview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.NotNil(t, out.Response)
	return out.Response
}

// logLines returns the operator's JSON log records whose message is msg.
func logLines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}
