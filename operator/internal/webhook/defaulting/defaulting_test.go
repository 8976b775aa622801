package defaulting

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

const version = "v1.4.0"
const image = "nvcr.io/dynamo/profiler:1.4.0"

func withOperation(op admissionv1.Operation, old runtime.Object) context.Context {
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op}}
	if old != nil {
		raw, err := json.Marshal(old)
		if err != nil {
			panic(err)
		}
		req.OldObject = runtime.RawExtension{Raw: raw}
	}
	return admission.NewContextWithRequest(context.Background(), req)
}

// patched decodes obj (raw JSON) into T, applies the patch that p returns for it — the request
// in ctx carrying obj, as the API server sends it — as the API server applies a mutating
// webhook's patch, and returns the patch and the object it gives ("" and obj when there is no
// patch).
func patched[T, Op any](t *testing.T, p func(context.Context, *T) ([]Op, error), ctx context.Context, obj string) (string, string) {
	t.Helper()
	var decoded T
	require.NoError(t, json.Unmarshal([]byte(obj), &decoded))
	req, err := admission.RequestFromContext(ctx)
	require.NoError(t, err)
	req.Object = runtime.RawExtension{Raw: []byte(obj)}
	ops, err := p(admission.NewContextWithRequest(ctx, req), &decoded)
	require.NoError(t, err)
	if len(ops) == 0 {
		return "", obj
	}
	patch, err := json.Marshal(ops)
	require.NoError(t, err)
	applied, err := jsonpatch.DecodePatch(patch)
	require.NoError(t, err)
	out, err := applied.Apply([]byte(obj))
	require.NoError(t, err, "applying %s to %s", patch, obj)
	return string(patch), string(out)
}

// assertPatchedOnce asserts that obj patched by p is patch and gives want, and that p leaves
// what it gives as it is; patch "" asserts that p leaves obj as it is.
func assertPatchedOnce[T, Op any](t *testing.T, p func(context.Context, *T) ([]Op, error), ctx context.Context, obj, patch, want string) {
	t.Helper()
	got, out := patched(t, p, ctx, obj)
	if patch == "" {
		assert.Empty(t, got)
		assert.Equal(t, obj, out)
		return
	}
	assert.JSONEq(t, patch, got)
	assert.JSONEq(t, want, out)

	again, twice := patched(t, p, ctx, out)
	assert.Empty(t, again, "applying twice must equal applying once")
	assert.Equal(t, out, twice)
}

func TestGraphDeployment(t *testing.T) {
	const key = v1alpha1.OperatorOriginVersionAnnotation
	d := GraphDeployment{OperatorVersion: version}
	cases := []struct {
		name           string
		ctx            context.Context
		obj            string
		patch, stamped string // "": no patch, the object unchanged
	}{
		{
			name:    "A7/create stamps the operator version",
			ctx:     withOperation(admissionv1.Create, nil),
			obj:     `{"metadata":{"name":"g"}}`,
			patch:   `[{"op":"add","path":"/metadata/annotations","value":{"` + key + `":"` + version + `"}}]`,
			stamped: `{"metadata":{"name":"g","annotations":{"` + key + `":"` + version + `"}}}`,
		},
		{
			name:    "A7/create keeps other annotations",
			ctx:     withOperation(admissionv1.Create, nil),
			obj:     `{"metadata":{"name":"g","annotations":{"team":"a"}}}`,
			patch:   `[{"op":"add","path":"/metadata/annotations/nvidia.com~1dynamo-operator-origin-version","value":"` + version + `"}]`,
			stamped: `{"metadata":{"name":"g","annotations":{"team":"a","` + key + `":"` + version + `"}}}`,
		},
		{
			name:    "A7/create replaces null annotations",
			ctx:     withOperation(admissionv1.Create, nil),
			obj:     `{"metadata":{"name":"g","annotations":null}}`,
			patch:   `[{"op":"add","path":"/metadata/annotations","value":{"` + key + `":"` + version + `"}}]`,
			stamped: `{"metadata":{"name":"g","annotations":{"` + key + `":"` + version + `"}}}`,
		},
		{
			name:    "A7/create of an object without metadata adds it",
			ctx:     withOperation(admissionv1.Create, nil),
			obj:     `{"spec":{}}`,
			patch:   `[{"op":"add","path":"/metadata","value":{"annotations":{"` + key + `":"` + version + `"}}}]`,
			stamped: `{"metadata":{"annotations":{"` + key + `":"` + version + `"}},"spec":{}}`,
		},
		{
			name: "A7/create keeps an existing origin version",
			ctx:  withOperation(admissionv1.Create, nil),
			obj:  `{"metadata":{"name":"g","annotations":{"` + key + `":"v1.0.0"}}}`,
		},
		{
			name: "A7/update never stamps",
			ctx:  withOperation(admissionv1.Update, &v1alpha1.DynamoGraphDeployment{}),
			obj:  `{"metadata":{"name":"g"}}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertPatchedOnce(t, d.Patch, tc.ctx, tc.obj, tc.patch, tc.stamped)
		})
	}

	t.Run("A7/no operator version stamps nothing", func(t *testing.T) {
		patch, _ := patched(t, GraphDeployment{}.Patch, withOperation(admissionv1.Create, nil), `{"metadata":{"name":"g"}}`)
		assert.Empty(t, patch)
	})

	t.Run("A7/without an admission request it fails instead of guessing the operation", func(t *testing.T) {
		dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "g"}}
		_, err := d.Patch(context.Background(), dgd)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "defaulting DynamoGraphDeployment team-a/g")
	})

	t.Run("an annotation key is escaped as a JSON pointer", func(t *testing.T) {
		op := addAnnotation(&metav1.ObjectMeta{Annotations: map[string]string{}}, "example.com/a~b", "v")
		assert.Equal(t, "/metadata/annotations/example.com~1a~0b", op.Path)
	})
}

// withOldObject is withOperation(Update, …) with request.oldObject the raw JSON old.
func withOldObject(old string) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Update, OldObject: runtime.RawExtension{Raw: []byte(old)},
	}})
}

func inPhase(phase v1beta1.Phase) *v1beta1.DynamoGraphDeploymentRequest {
	return &v1beta1.DynamoGraphDeploymentRequest{Status: v1beta1.DynamoGraphDeploymentRequestStatus{Phase: phase}}
}

func TestGraphDeploymentRequest(t *testing.T) {
	d := GraphDeploymentRequest{Image: image}
	create := withOperation(admissionv1.Create, nil)
	const (
		addImage    = `[{"op":"add","path":"/spec/image","value":"` + image + `"}]`
		addSpec     = `[{"op":"add","path":"/spec","value":{"image":"` + image + `"}}]`
		imageFilled = `{"metadata":{"name":"r"},"spec":{"model":"m","image":"` + image + `"}}`
		imageOnly   = `{"metadata":{"name":"r"},"spec":{"image":"` + image + `"}}`
	)
	type fillIn struct {
		name            string
		ctx             context.Context
		obj             string
		patch, filledIn string // "": no patch, the object unchanged
	}
	cases := []fillIn{
		{name: "A7/create fills in an absent image", ctx: create, obj: `{"metadata":{"name":"r"},"spec":{"model":"m"}}`, patch: addImage, filledIn: imageFilled},
		{name: "A7/create fills in an empty image", ctx: create, obj: `{"metadata":{"name":"r"},"spec":{"model":"m","image":""}}`, patch: addImage, filledIn: imageFilled},
		{name: "A7/create keeps a chosen image", ctx: create, obj: `{"metadata":{"name":"r"},"spec":{"model":"m","image":"mine:1"}}`},
		{name: "A7/create of a request without spec adds it", ctx: create, obj: `{"metadata":{"name":"r"}}`, patch: addSpec, filledIn: imageOnly},
		{name: "A7/create replaces a null spec", ctx: create, obj: `{"metadata":{"name":"r"},"spec":null}`, patch: addSpec, filledIn: imageOnly},
		{name: "A7/create fills in an empty spec", ctx: create, obj: `{"metadata":{"name":"r"},"spec":{}}`, patch: addImage, filledIn: imageOnly},
		{name: "A7/create keeps the members of a spec that decode as absent", ctx: create,
			obj: `{"metadata":{"name":"r"},"spec":{"model":"","autoApply":false}}`, patch: addImage,
			filledIn: `{"metadata":{"name":"r"},"spec":{"model":"","autoApply":false,"image":"` + image + `"}}`},
		{name: "A7/update of a request without phase fills in the image", ctx: withOperation(admissionv1.Update, inPhase("")),
			obj: `{"metadata":{"name":"r"},"spec":{"model":"m"}}`, patch: addImage, filledIn: imageFilled},
		{name: "A7/update of a Pending request fills in the image", ctx: withOperation(admissionv1.Update, inPhase(v1beta1.PhasePending)),
			obj: `{"metadata":{"name":"r"},"spec":{"model":"m"}}`, patch: addImage, filledIn: imageFilled},
	}
	for _, phase := range v1beta1.SpecLockedPhases {
		cases = append(cases, fillIn{name: "A7/update of a " + string(phase) + " request leaves the spec alone", ctx: withOperation(admissionv1.Update, inPhase(phase)),
			obj: `{"metadata":{"name":"r"},"spec":{"model":"m"}}`})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertPatchedOnce(t, d.Patch, tc.ctx, tc.obj, tc.patch, tc.filledIn)
		})
	}

	t.Run("A7/no default image leaves requests alone", func(t *testing.T) {
		patch, _ := patched(t, GraphDeploymentRequest{}.Patch, create, `{"metadata":{"name":"r"}}`)
		assert.Empty(t, patch)
	})

	t.Run("A7/an old object that does not decode is an error when there is an image to fill in", func(t *testing.T) {
		r := &v1beta1.DynamoGraphDeploymentRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r"}}
		_, err := d.Patch(withOldObject(`{"status":{"phase":1}}`), r)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "defaulting DynamoGraphDeploymentRequest team-a/r: decoding the old object: ")

		r.Spec.Image = "mine:1"
		patch, err := d.Patch(withOldObject(`{"status":{"phase":1}}`), r)
		require.NoError(t, err, "an image set: the old object is not read")
		assert.Empty(t, patch)
	})

	t.Run("A7/without an admission request it fails instead of guessing the operation", func(t *testing.T) {
		_, err := d.Patch(context.Background(), &v1beta1.DynamoGraphDeploymentRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r"}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "defaulting DynamoGraphDeploymentRequest team-a/r")
	})
}
