package load

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// DryRunConfig describes server-side dry-run creates through the API server: the
// admission overhead ladders, with webhooks and without (catalog P2).
type DryRunConfig struct {
	// URL is the collection to POST to, with dryRun=All, e.g.
	// https://127.0.0.1:6443/apis/nvidia.com/v1alpha1/namespaces/bench/dynamographdeployments?dryRun=All.
	URL string
	// Namespace of the objects (the one in URL).
	Namespace string
	// Object builds the (valid) object each request creates.
	Object ObjectFunc
	// Annotation is the mutating webhook's stamp. With Stamped the answer must
	// carry it (the webhooks ran); without, it must not (the control: the
	// webhooks were bypassed, so the step measures the API server alone).
	// Empty: there is no stamp to look for (a target's object), and a 201 of
	// the right kind passes.
	Annotation string
	Stamped    bool
}

// DryRun is a concurrency-safe vegeta targeter of dry-run creates together
// with the check of their answers.
type DryRun struct {
	cfg    DryRunConfig
	body   *bodyTemplate
	kind   string
	header http.Header
	seq    atomic.Uint64
}

// NewDryRun prepares the request template of cfg.
func NewDryRun(cfg DryRunConfig) (*DryRun, error) {
	if cfg.Object == nil {
		return nil, errors.New("dry-run workload: no object builder")
	}
	obj := cfg.Object(cfg.Namespace, namePlaceholder)
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s/%s: %w", obj.GetKind(), cfg.Namespace, namePlaceholder, err)
	}
	body, err := newBodyTemplate(raw, namePlaceholder)
	if err != nil {
		return nil, err
	}
	return &DryRun{cfg: cfg, body: body, kind: obj.GetKind(),
		header: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}}}, nil
}

// Target fills t with the next dry-run create of a uniquely named object; it
// is a vegeta.Targeter and safe for the attacker's concurrent workers.
func (d *DryRun) Target(t *vegeta.Target) error {
	n := d.seq.Add(1) - 1
	t.Method = http.MethodPost
	t.URL = d.cfg.URL
	t.Header = d.header
	t.Body = d.body.Render("bench-" + strconv.FormatUint(n, 10))
	return nil
}

// Check judges one answer: 201 Created with the object, stamped by the
// mutating webhook or, for the control, not.
func (d *DryRun) Check(r *vegeta.Result) error {
	if r.Code != http.StatusCreated {
		return fmt.Errorf("HTTP %d, want 201 Created: %s", r.Code, statusMessage(r.Body))
	}
	var obj struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(r.Body, &obj); err != nil {
		return fmt.Errorf("answer is not a %s: %v", d.kind, err)
	}
	if obj.Kind != d.kind {
		return fmt.Errorf("answer is a %q, want %s", obj.Kind, d.kind)
	}
	if d.cfg.Annotation == "" {
		return nil
	}
	_, stamped := obj.Metadata.Annotations[d.cfg.Annotation]
	switch {
	case d.cfg.Stamped && !stamped:
		return fmt.Errorf("%s came back without %s: the mutating webhook did not run", d.kind, d.cfg.Annotation)
	case !d.cfg.Stamped && stamped:
		return fmt.Errorf("control %s came back with %s: the webhooks were not bypassed", d.kind, d.cfg.Annotation)
	}
	return nil
}

// statusMessage extracts a metav1.Status message from an error answer, so a
// denial reads as the API server's words rather than raw JSON.
func statusMessage(body []byte) string {
	var st struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return st.Message
	}
	if len(body) > 200 {
		body = body[:200]
	}
	return string(body)
}
