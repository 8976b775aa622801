package load

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

func widget(size int64) ObjectFunc {
	return func(ns, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"size": size},
		}}
	}
}

func newWidgetAdmission(t *testing.T, mutating bool, ratio float64) *Admission {
	t.Helper()
	a, err := NewAdmission(AdmissionConfig{
		URL: "https://webhook.test/validate-widget?timeout=10s", Mutating: mutating,
		Resource: widgets, Namespace: "bench", Valid: widget(1), Invalid: widget(-1),
		InvalidRatio: ratio, DeniedField: "spec.size", PatchContains: "origin-version",
	})
	require.NoError(t, err)
	return a
}

// decodeRequest reads a generated body the way a webhook server does.
func decodeRequest(t *testing.T, body []byte) (*admissionv1.AdmissionRequest, *unstructured.Unstructured) {
	t.Helper()
	var review admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(body, &review), "%s", body)
	require.Equal(t, "admission.k8s.io/v1", review.APIVersion)
	require.Equal(t, "AdmissionReview", review.Kind)
	require.NotNil(t, review.Request)
	obj := &unstructured.Unstructured{}
	require.NoError(t, obj.UnmarshalJSON(review.Request.Object.Raw))
	return review.Request, obj
}

// answer builds the HTTP result of a webhook's response to req.
func answer(req *admissionv1.AdmissionRequest, resp admissionv1.AdmissionResponse) *vegeta.Result {
	resp.UID = req.UID
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: &resp,
	})
	return &vegeta.Result{Code: http.StatusOK, Body: body}
}

func TestAdmissionRequestsAreWhatTheAPIServerSends(t *testing.T) {
	a := newWidgetAdmission(t, false, 0.25)
	var tgt vegeta.Target
	require.NoError(t, a.Target(&tgt))
	assert.Equal(t, http.MethodPost, tgt.Method)
	assert.Equal(t, "https://webhook.test/validate-widget?timeout=10s", tgt.URL)
	assert.Equal(t, "application/json", tgt.Header.Get("Content-Type"))

	req, obj := decodeRequest(t, tgt.Body)
	assert.Equal(t, admissionv1.Create, req.Operation)
	assert.Equal(t, metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, req.Kind)
	assert.Equal(t, metav1.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, req.Resource)
	assert.Equal(t, "bench", req.Namespace)
	assert.Equal(t, "bench-0", req.Name)
	assert.Equal(t, "bench-0", obj.GetName(), "the object carries the request's name")
	assert.Equal(t, "bench", obj.GetNamespace())
	assert.Len(t, string(req.UID), 36, "a UUID")
	assert.NotContains(t, string(tgt.Body), "placeholder")
}

func TestAdmissionTargeterIsSafeAndUniqueUnderConcurrency(t *testing.T) {
	a := newWidgetAdmission(t, false, 0.2)
	const workers, each = 8, 250
	var mu sync.Mutex
	uids, names := map[string]bool{}, map[string]bool{}
	invalid := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				var tgt vegeta.Target
				if err := a.Target(&tgt); err != nil {
					t.Error(err)
					return
				}
				var review admissionv1.AdmissionReview
				if err := json.Unmarshal(tgt.Body, &review); err != nil {
					t.Error(err)
					return
				}
				obj := &unstructured.Unstructured{}
				if err := obj.UnmarshalJSON(review.Request.Object.Raw); err != nil {
					t.Error(err)
					return
				}
				size, _, _ := unstructured.NestedInt64(obj.Object, "spec", "size")
				mu.Lock()
				uids[string(review.Request.UID)] = true
				names[review.Request.Name] = true
				if size < 0 {
					invalid++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Len(t, uids, workers*each, "every request has its own UID")
	assert.Len(t, names, workers*each, "every request has its own object name")
	assert.Equal(t, workers*each/5, invalid, "exactly the stated share of invalid objects")
}

func TestInvalidObjectsAreSpreadEvenly(t *testing.T) {
	for _, ratio := range []float64{0, 0.1, 0.2, 0.5, 1} {
		t.Run(fmt.Sprint(ratio), func(t *testing.T) {
			const window = 20
			for start := uint64(0); start < 200; start += 7 {
				n := 0
				for i := start; i < start+window; i++ {
					if isInvalid(i, ratio) {
						n++
					}
				}
				assert.InDelta(t, ratio*window, float64(n), 1, "requests %d..%d", start, start+window-1)
			}
		})
	}
}

func TestValidatingCheckWantsTheVerdictTheObjectDeserves(t *testing.T) {
	a := newWidgetAdmission(t, false, 0.5)
	next := func() (*admissionv1.AdmissionRequest, bool) {
		var tgt vegeta.Target
		require.NoError(t, a.Target(&tgt))
		req, obj := decodeRequest(t, tgt.Body)
		size, _, _ := unstructured.NestedInt64(obj.Object, "spec", "size")
		return req, size < 0
	}
	allow := admissionv1.AdmissionResponse{Allowed: true}
	deny := admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Code: 422, Message: `Widget.example.com "bench-1" is invalid: spec.size: Invalid value: -1: must be ≥ 0`}}
	denyOther := admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Code: 403, Message: "namespace is excluded"}}

	for range 4 {
		req, invalid := next()
		if invalid {
			require.NoError(t, a.Check(answer(req, deny)))
		} else {
			require.NoError(t, a.Check(answer(req, allow)))
		}
	}
	req, invalid := next()
	if !invalid {
		req, invalid = next()
	}
	require.True(t, invalid)
	require.EqualError(t, a.Check(answer(req, allow)), "validating webhook allowed the invalid object")

	req, invalid = next()
	require.False(t, invalid)
	require.ErrorContains(t, a.Check(answer(req, deny)), "validating webhook denied the valid object: Widget.example.com")

	req, invalid = next()
	require.True(t, invalid)
	assert.EqualError(t, a.Check(answer(req, denyOther)), "validating webhook denied the invalid object without naming spec.size: namespace is excluded")
}

func TestCheckRejectsMalformedOrForeignAnswers(t *testing.T) {
	a := newWidgetAdmission(t, false, 0)
	var tgt vegeta.Target
	require.NoError(t, a.Target(&tgt))
	req, _ := decodeRequest(t, tgt.Body)

	require.EqualError(t, a.Check(&vegeta.Result{Code: 500}), "HTTP 500, want 200")
	require.ErrorContains(t, a.Check(&vegeta.Result{Code: 200, Body: []byte("<html>")}), "answer is not an AdmissionReview")
	require.EqualError(t, a.Check(&vegeta.Result{Code: 200, Body: []byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"uid":"x","allowed":true}}`)}),
		"answer is admission.k8s.io/v1beta1 AdmissionReview, want admission.k8s.io/v1 AdmissionReview")
	require.EqualError(t, a.Check(&vegeta.Result{Code: 200, Body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)}),
		"AdmissionReview without a response")

	foreign := *req
	foreign.UID = "not-a-request-of-ours"
	require.EqualError(t, a.Check(answer(&foreign, admissionv1.AdmissionResponse{Allowed: true})),
		"AdmissionReview response carries a UID no pending request has")

	require.NoError(t, a.Check(answer(req, admissionv1.AdmissionResponse{Allowed: true})))
	assert.EqualError(t, a.Check(answer(req, admissionv1.AdmissionResponse{Allowed: true})),
		"AdmissionReview response carries a UID no pending request has", "an answer is matched once")
}

func TestMutatingCheckWantsThePatch(t *testing.T) {
	a := newWidgetAdmission(t, true, 0.5)
	jsonPatch := admissionv1.PatchTypeJSONPatch
	patch := []byte(`[{"op":"add","path":"/metadata/annotations","value":{"example.com/origin-version":"v1"}}]`)
	for i := range 4 {
		var tgt vegeta.Target
		require.NoError(t, a.Target(&tgt))
		req, _ := decodeRequest(t, tgt.Body)
		switch i {
		case 0, 1: // valid and invalid objects alike are patched
			require.NoError(t, a.Check(answer(req, admissionv1.AdmissionResponse{Allowed: true, PatchType: &jsonPatch, Patch: patch})))
		case 2:
			require.EqualError(t, a.Check(answer(req, admissionv1.AdmissionResponse{Allowed: true})),
				`mutating webhook answered without a JSON patch containing "origin-version"`)
		case 3:
			assert.EqualError(t, a.Check(answer(req, admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: "no"}})),
				"mutating webhook denied the object: no")
		}
	}
}

func TestNewAdmissionRejectsIncompleteConfigs(t *testing.T) {
	_, err := NewAdmission(AdmissionConfig{Resource: widgets, Valid: widget(1), Invalid: widget(-1), InvalidRatio: 1.5})
	require.EqualError(t, err, "invalid-object ratio 1.5: must be between 0 and 1")
	_, err = NewAdmission(AdmissionConfig{Resource: widgets, Valid: widget(1), Invalid: widget(-1), InvalidRatio: 0.2})
	require.EqualError(t, err, "a validating workload with invalid objects needs the field its denials must name")
	_, err = NewAdmission(AdmissionConfig{Resource: widgets, Mutating: true, Valid: widget(1), InvalidRatio: 0.2})
	assert.EqualError(t, err, "admission workload: no object builder")
}

func TestBodyTemplate(t *testing.T) {
	tmpl, err := newBodyTemplate([]byte(`{"a":"NAME","b":"UID","c":"NAME"}`), "UID", "NAME")
	require.NoError(t, err)
	assert.Equal(t, `{"a":"n1","b":"u1","c":"n1"}`, string(tmpl.Render("u1", "n1")))                   //nolint:testifylint // encoded-compare: byte for byte on purpose; JSONEq would accept reordered or reformatted output
	assert.Equal(t, `{"a":"name-2","b":"uid-2","c":"name-2"}`, string(tmpl.Render("uid-2", "name-2"))) //nolint:testifylint // encoded-compare: as above

	_, err = newBodyTemplate([]byte(`{"a":"NAME"}`), "UID", "NAME")
	require.ErrorContains(t, err, `placeholder "UID" does not occur`)
	assert.False(t, strings.Contains(namePlaceholder, uidPlaceholder) || strings.Contains(uidPlaceholder, namePlaceholder))
}
