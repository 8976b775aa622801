package target

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestPatchSeen(t *testing.T) {
	got := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"owner": "gatekeeper"}, "annotations": map[string]any{"a/b": "1"}},
		"spec":     map[string]any{"replicas": int64(2), "list": []any{"x"}},
	}}
	for _, c := range []struct {
		name string
		ops  []PatchOp
		want string
	}{
		{"every operation shown", []PatchOp{
			{Op: "add", Path: "/metadata/labels/owner", Value: "gatekeeper"},
			{Op: "add", Path: "/metadata/annotations/a~1b"},
			{Op: "replace", Path: "/spec/replicas", Value: 2.0},
			{Op: "add", Path: "/spec/list/0", Value: "x"},
			{Op: "remove", Path: "/spec/image"},
		}, ""},
		{"a path the object lacks", []PatchOp{{Op: "add", Path: "/spec/image"}},
			"add /spec/image: the admitted object has no /spec/image"},
		{"another value", []PatchOp{{Op: "add", Path: "/metadata/labels/owner", Value: "someone"}},
			`add /metadata/labels/owner: expected "someone", saw "gatekeeper"`},
		{"a path not removed", []PatchOp{{Op: "remove", Path: "/spec/replicas"}},
			"remove /spec/replicas: the admitted object still has 2"},
		{"an operation a probe cannot check", []PatchOp{{Op: "move", Path: "/spec"}},
			`operation "move" at /spec: a probe expects add, replace or remove`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := PatchSeen(c.ops, got)
			if c.want == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, c.want)
			}
		})
	}
}

func TestObjectsReadsEveryDocument(t *testing.T) {
	tg, err := Load("../../targets/gatekeeper")
	require.NoError(t, err)
	objs, err := tg.Objects("setup/cert-manager.yaml")
	require.NoError(t, err)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	assert.Equal(t, []string{"Issuer", "Certificate", "Issuer", "Certificate"}, kinds,
		"a self-signed Issuer and the CA Certificate it signs, then the CA Issuer and the serving Certificate")
	_, err = tg.Object("setup/cert-manager.yaml")
	assert.EqualError(t, err, "../../targets/gatekeeper/setup/cert-manager.yaml holds 4 objects; a probe is one object")
}
