package defaulting

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func graph(annotations map[string]string) *v1alpha1.DynamoGraphDeployment {
	return &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "g", Annotations: annotations}}
}

func TestGraphDeployment(t *testing.T) {
	d := GraphDeployment{OperatorVersion: version}
	cases := []struct {
		name string
		ctx  context.Context
		obj  *v1alpha1.DynamoGraphDeployment
		want map[string]string
	}{
		{
			name: "A7/create stamps the operator version",
			ctx:  withOperation(admissionv1.Create, nil),
			obj:  graph(nil),
			want: map[string]string{v1alpha1.OperatorOriginVersionAnnotation: version},
		},
		{
			name: "A7/create keeps other annotations",
			ctx:  withOperation(admissionv1.Create, nil),
			obj:  graph(map[string]string{"team": "a"}),
			want: map[string]string{"team": "a", v1alpha1.OperatorOriginVersionAnnotation: version},
		},
		{
			name: "A7/create keeps an existing origin version",
			ctx:  withOperation(admissionv1.Create, nil),
			obj:  graph(map[string]string{v1alpha1.OperatorOriginVersionAnnotation: "v1.0.0"}),
			want: map[string]string{v1alpha1.OperatorOriginVersionAnnotation: "v1.0.0"},
		},
		{
			name: "A7/update never stamps",
			ctx:  withOperation(admissionv1.Update, graph(nil)),
			obj:  graph(nil),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, d.Default(tc.ctx, tc.obj))
			assert.Equal(t, tc.want, tc.obj.Annotations)

			once := tc.obj.DeepCopy()
			require.NoError(t, d.Default(tc.ctx, tc.obj))
			assert.Equal(t, once, tc.obj, "applying twice must equal applying once")
		})
	}

	t.Run("A7/no operator version stamps nothing", func(t *testing.T) {
		obj := graph(nil)
		require.NoError(t, GraphDeployment{}.Default(withOperation(admissionv1.Create, nil), obj))
		assert.Nil(t, obj.Annotations)
	})

	t.Run("A7/without an admission request it fails instead of guessing the operation", func(t *testing.T) {
		err := d.Default(context.Background(), graph(nil))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "defaulting DynamoGraphDeployment team-a/g")
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
