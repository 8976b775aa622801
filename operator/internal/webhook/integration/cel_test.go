package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/testcluster"
)

// TestA11CELWithoutWebhooks runs against a second control plane with the CRDs but no webhook
// configurations (the webhook bypassed, as with failurePolicy Ignore and the operator down):
// the CRDs' own CEL rules must still reject the immutable-field changes.
func TestA11CELWithoutWebhooks(t *testing.T) {
	bare := testcluster.Start(t)
	c := bare.Client
	ctx := reqCtx(t)
	const ns = "a11"
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	for _, tc := range []struct {
		name   string
		obj    client.Object
		change func(client.Object)
		denied string
	}{
		{
			name: "DynamoComponentDeployment backendFramework", obj: dcd(ns, "decode"),
			change: func(o client.Object) { o.(*v1alpha1.DynamoComponentDeployment).Spec.BackendFramework = "sglang" },
			denied: "backendFramework is immutable",
		},
		{
			name: "DynamoGraphDeployment backendFramework", obj: dgd(ns, "graph"),
			change: func(o client.Object) { o.(*v1alpha1.DynamoGraphDeployment).Spec.BackendFramework = "" },
			denied: "backendFramework is immutable",
		},
		{
			name: "DynamoModel modelType", obj: model(ns, "type"),
			change: func(o client.Object) { o.(*v1alpha1.DynamoModel).Spec.ModelType = v1alpha1.ModelTypeLoRA },
			denied: "modelType is immutable",
		},
		{
			name: "DynamoModel baseModelName", obj: model(ns, "base"),
			change: func(o client.Object) { o.(*v1alpha1.DynamoModel).Spec.BaseModelName = "other" },
			denied: "baseModelName is immutable",
		},
	} {
		t.Run("A11/"+tc.name, func(t *testing.T) {
			require.NoError(t, c.Create(ctx, tc.obj))
			tc.change(tc.obj)
			requireCELDenied(t, c.Update(ctx, tc.obj), tc.denied)
		})
	}
	t.Run("A11/DynamoGraphDeploymentRequest spec in a locked phase", func(t *testing.T) {
		for _, phase := range v1beta1.SpecLockedPhases {
			obj := dgdr(ns, "locked-"+strings.ToLower(string(phase)))
			require.NoError(t, c.Create(ctx, obj))
			obj.Status.Phase = phase
			require.NoError(t, c.Status().Update(ctx, obj))
			obj.Spec.Model = "other"
			requireCELDenied(t, c.Update(ctx, obj), "spec is immutable while the request is Profiling, Deploying or Deployed")
		}
	})
	t.Run("A11/the same changes pass CEL where allowed", func(t *testing.T) {
		obj := dgdr(ns, "pending")
		require.NoError(t, c.Create(ctx, obj))
		obj.Status.Phase = v1beta1.PhasePending
		require.NoError(t, c.Status().Update(ctx, obj))
		obj.Spec.Model = "other"
		require.NoError(t, c.Update(ctx, obj))
	})
}
