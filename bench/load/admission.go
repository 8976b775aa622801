package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Placeholders of the request templates. They are valid DNS names and UIDs
// themselves, so the template objects pass any client-side validation, and
// long enough never to occur in a real object.
const (
	namePlaceholder = "gauntlet-bench-placeholder-name"
	uidPlaceholder  = "00000000-gaun-tlet-benc-placeholder0"
)

// ObjectFunc builds the object one request carries; name is unique per
// request.
type ObjectFunc func(namespace, name string) *unstructured.Unstructured

// AdmissionConfig describes AdmissionReview requests for one webhook path, the
// way the API server sends them for a CREATE: the direct latency ladders (catalog P1).
type AdmissionConfig struct {
	// URL is the webhook's full address, e.g.
	// https://10.244.0.5:9443/validate-nvidia-com-v1alpha1-dynamographdeployment?timeout=10s.
	URL string
	// Mutating says the path is a mutating webhook: every request must be
	// allowed with a JSON patch. Otherwise valid objects must be allowed and
	// invalid ones denied.
	Mutating bool
	// Resource is the resource being created, e.g. nvidia.com/v1alpha1 dynamographdeployments.
	Resource schema.GroupVersionResource
	// Namespace of the objects.
	Namespace string
	// Valid and Invalid build the two objects mixed into the load.
	Valid, Invalid ObjectFunc
	// InvalidRatio is the fraction of requests carrying the invalid object,
	// between 0 and 1; they are spread evenly (every fifth request at 0.2), so
	// every window of the attack sees the stated mix.
	InvalidRatio float64
	// DeniedField must appear in the message of a denial (validating
	// webhooks), e.g. "spec.services": a denial for the wrong reason is a
	// failed request.
	DeniedField string
	// PatchContains must appear in the JSON patch of a mutating webhook's
	// answer, e.g. the annotation it stamps.
	PatchContains string
}

// Admission is a concurrency-safe vegeta targeter of AdmissionReview requests
// together with the check of their answers. Every request gets its own UID and
// object name; the UID is how an answer is matched to the expectation of the
// request that caused it.
type Admission struct {
	cfg     AdmissionConfig
	valid   *bodyTemplate
	invalid *bodyTemplate
	header  http.Header
	seq     atomic.Uint64
	// pending maps a request UID to whether its object was the invalid one,
	// until its answer is checked.
	pending sync.Map
}

// NewAdmission prepares the request templates of cfg.
func NewAdmission(cfg AdmissionConfig) (*Admission, error) {
	if cfg.InvalidRatio < 0 || cfg.InvalidRatio > 1 {
		return nil, fmt.Errorf("invalid-object ratio %v: must be between 0 and 1", cfg.InvalidRatio)
	}
	if !cfg.Mutating && cfg.InvalidRatio > 0 && cfg.DeniedField == "" {
		return nil, errors.New("a validating workload with invalid objects needs the field its denials must name")
	}
	a := &Admission{cfg: cfg, header: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}}}
	var err error
	if a.valid, err = admissionTemplate(cfg, cfg.Valid); err != nil {
		return nil, err
	}
	if cfg.InvalidRatio > 0 {
		if a.invalid, err = admissionTemplate(cfg, cfg.Invalid); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// admissionTemplate marshals the AdmissionReview the API server would send
// for a CREATE of obj.
func admissionTemplate(cfg AdmissionConfig, build ObjectFunc) (*bodyTemplate, error) {
	if build == nil {
		return nil, errors.New("admission workload: no object builder")
	}
	obj := build(cfg.Namespace, namePlaceholder)
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s/%s: %w", obj.GetKind(), cfg.Namespace, namePlaceholder, err)
	}
	gvk := obj.GroupVersionKind()
	kind := metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
	resource := metav1.GroupVersionResource{Group: cfg.Resource.Group, Version: cfg.Resource.Version, Resource: cfg.Resource.Resource}
	dryRun := false
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:             types.UID(uidPlaceholder),
			Kind:            kind,
			Resource:        resource,
			RequestKind:     &kind,
			RequestResource: &resource,
			Name:            namePlaceholder,
			Namespace:       cfg.Namespace,
			Operation:       admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{
				Username: "gauntlet-bench",
				Groups:   []string{"system:masters", "system:authenticated"},
			},
			Object:  runtime.RawExtension{Raw: raw},
			DryRun:  &dryRun,
			Options: runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"gauntlet-bench"}`)},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, fmt.Errorf("encoding AdmissionReview for %s: %w", gvk.Kind, err)
	}
	return newBodyTemplate(body, uidPlaceholder, namePlaceholder)
}

// Target fills t with the next request; it is a vegeta.Targeter and safe for
// the attacker's concurrent workers.
func (a *Admission) Target(t *vegeta.Target) error {
	n := a.seq.Add(1) - 1
	invalid := a.invalid != nil && isInvalid(n, a.cfg.InvalidRatio)
	uid := string(uuid.NewUUID())
	name := "bench-" + strconv.FormatUint(n, 10)
	tmpl := a.valid
	if invalid {
		tmpl = a.invalid
	}
	a.pending.Store(uid, invalid)
	t.Method = http.MethodPost
	t.URL = a.cfg.URL
	t.Header = a.header
	t.Body = tmpl.Render(uid, name)
	return nil
}

// isInvalid spreads a ratio evenly over the sequence: request n carries the
// invalid object when ⌊(n+1)·ratio⌋ > ⌊n·ratio⌋, so any k consecutive
// requests hold k·ratio ± 1 invalid ones.
func isInvalid(n uint64, ratio float64) bool {
	return uint64(float64(n+1)*ratio) > uint64(float64(n)*ratio)
}

// Check judges one answer: HTTP 200, an admission.k8s.io/v1 AdmissionReview
// whose response answers a request of this workload (by UID) with the
// expected verdict — allowed for valid objects, denied naming DeniedField for
// invalid ones, allowed with a JSON patch for a mutating webhook.
func (a *Admission) Check(r *vegeta.Result) error {
	if r.Code != http.StatusOK {
		return fmt.Errorf("HTTP %d, want 200", r.Code)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(r.Body, &review); err != nil {
		return fmt.Errorf("answer is not an AdmissionReview: %v", err)
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" {
		return fmt.Errorf("answer is %s %s, want admission.k8s.io/v1 AdmissionReview", review.APIVersion, review.Kind)
	}
	resp := review.Response
	if resp == nil {
		return errors.New("AdmissionReview without a response")
	}
	v, ok := a.pending.LoadAndDelete(string(resp.UID))
	if !ok {
		return errors.New("AdmissionReview response carries a UID no pending request has")
	}
	invalid := v.(bool)
	switch {
	case a.cfg.Mutating:
		if !resp.Allowed {
			return fmt.Errorf("mutating webhook denied the object: %s", resultMessage(resp))
		}
		if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch || !bytes.Contains(resp.Patch, []byte(a.cfg.PatchContains)) {
			return fmt.Errorf("mutating webhook answered without a JSON patch containing %q", a.cfg.PatchContains)
		}
	case invalid:
		if resp.Allowed {
			return errors.New("validating webhook allowed the invalid object")
		}
		if msg := resultMessage(resp); !strings.Contains(msg, a.cfg.DeniedField) {
			return fmt.Errorf("validating webhook denied the invalid object without naming %s: %s", a.cfg.DeniedField, msg)
		}
	default:
		if !resp.Allowed {
			return fmt.Errorf("validating webhook denied the valid object: %s", resultMessage(resp))
		}
	}
	return nil
}

func resultMessage(resp *admissionv1.AdmissionResponse) string {
	if resp.Result == nil {
		return "(no message)"
	}
	return resp.Result.Message
}
