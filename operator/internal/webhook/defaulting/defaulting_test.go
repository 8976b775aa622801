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

// stamped applies d's patch for obj (raw JSON) as the API server applies a mutating webhook's
// patch, and returns the patch and the object it gives.
func stamped(t *testing.T, d GraphDeployment, ctx context.Context, obj string) (string, string) {
	t.Helper()
	var dgd v1alpha1.DynamoGraphDeployment
	require.NoError(t, json.Unmarshal([]byte(obj), &dgd))
	ops, err := d.Patch(ctx, &dgd)
	require.NoError(t, err)
	if len(ops) == 0 {
		return "", obj
	}
	patch, err := json.Marshal(ops)
	require.NoError(t, err)
	decoded, err := jsonpatch.DecodePatch(patch)
	require.NoError(t, err)
	out, err := decoded.Apply([]byte(obj))
	require.NoError(t, err, "applying %s to %s", patch, obj)
	return string(patch), string(out)
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
			patch, out := stamped(t, d, tc.ctx, tc.obj)
			if tc.patch == "" {
				assert.Empty(t, patch)
				assert.Equal(t, tc.obj, out)
				return
			}
			assert.JSONEq(t, tc.patch, patch)
			assert.JSONEq(t, tc.stamped, out)

			again, twice := stamped(t, d, tc.ctx, out)
			assert.Empty(t, again, "applying twice must equal applying once")
			assert.Equal(t, out, twice)
		})
	}

	t.Run("A7/no operator version stamps nothing", func(t *testing.T) {
		patch, _ := stamped(t, GraphDeployment{}, withOperation(admissionv1.Create, nil), `{"metadata":{"name":"g"}}`)
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

func request(img string, phase v1beta1.Phase) *v1beta1.DynamoGraphDeploymentRequest {
	return &v1beta1.DynamoGraphDeploymentRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r"},
		Spec:       v1beta1.DynamoGraphDeploymentRequestSpec{Model: "m", Image: img},
		Status:     v1beta1.DynamoGraphDeploymentRequestStatus{Phase: phase},
	}
}

func TestGraphDeploymentRequest(t *testing.T) {
	d := GraphDeploymentRequest{Image: image}
	cases := []struct {
		name string
		ctx  context.Context
		obj  *v1beta1.DynamoGraphDeploymentRequest
		want string
	}{
		{name: "A7/create fills in the default image", ctx: withOperation(admissionv1.Create, nil), obj: request("", ""), want: image},
		{name: "A7/create keeps a chosen image", ctx: withOperation(admissionv1.Create, nil), obj: request("mine:1", ""), want: "mine:1"},
		{
			name: "A7/update of a Pending request fills in the default image",
			ctx:  withOperation(admissionv1.Update, request("", v1beta1.PhasePending)),
			obj:  request("", v1beta1.PhasePending),
			want: image,
		},
		{
			name: "A7/update of a Profiling request leaves the spec alone",
			ctx:  withOperation(admissionv1.Update, request("", v1beta1.PhaseProfiling)),
			obj:  request("", v1beta1.PhaseProfiling),
			want: "",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, d.Default(tc.ctx, tc.obj))
			assert.Equal(t, tc.want, tc.obj.Spec.Image)

			once := tc.obj.DeepCopy()
			require.NoError(t, d.Default(tc.ctx, tc.obj))
			assert.Equal(t, once, tc.obj, "applying twice must equal applying once")
		})
	}

	t.Run("A7/no default image leaves requests alone", func(t *testing.T) {
		obj := request("", "")
		require.NoError(t, GraphDeploymentRequest{}.Default(withOperation(admissionv1.Create, nil), obj))
		assert.Empty(t, obj.Spec.Image)
	})
}
