package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

func TestADirectAnswerShowsTheProbesPatchOnceApplied(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "probe", "labels": map[string]any{"app": "x"}},
	}}
	p := target.Probe{Webhook: "mutation.example.com", Admitted: "probes/cm.yaml", Patch: `[{"op": "add", "path": "/metadata/labels/owner", "value": "gatekeeper"}]`}
	for _, tc := range []struct {
		name, patch, want string
	}{
		{"the declared operation", `[{"op":"add","path":"/metadata/labels/owner","value":"gatekeeper"}]`, ""},
		{"another form with the same result", `[{"op":"replace","path":"/metadata/labels","value":{"app":"x","owner":"gatekeeper"}}]`, ""},
		{"another value", `[{"op":"add","path":"/metadata/labels/owner","value":"someone"}]`, `expected "gatekeeper", saw "someone"`},
		{"no patch", ``, "the admitted object has no /metadata/labels/owner"},
		{"a patch that does not apply", `[{"op":"replace","path":"/spec/x","value":1}]`, "does not apply to probes/cm.yaml"},
		{"no JSON patch", `{"owner":"gatekeeper"}`, "is no JSON patch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judgeDirectPatch(p, obj, &admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(tc.patch)})
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tc.want)
		})
	}
}
