package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

	t.Run("A11/DynamoComponentDeployment backendFramework", func(t *testing.T) {
		obj := dcd(ns, "decode")
		require.NoError(t, c.Create(ctx, obj))
		obj.Spec.BackendFramework = "sglang"
		requireCELDenied(t, c.Update(ctx, obj), "backendFramework is immutable")
	})
	t.Run("A11/DynamoGraphDeployment backendFramework", func(t *testing.T) {
		obj := dgd(ns, "graph")
		require.NoError(t, c.Create(ctx, obj))
		obj.Spec.BackendFramework = ""
		requireCELDenied(t, c.Update(ctx, obj), "backendFramework is immutable")
	})
	t.Run("A11/DynamoModel modelType", func(t *testing.T) {
		obj := model(ns, "type")
		require.NoError(t, c.Create(ctx, obj))
		obj.Spec.ModelType = v1alpha1.ModelTypeLoRA
		requireCELDenied(t, c.Update(ctx, obj), "modelType is immutable")
	})
	t.Run("A11/DynamoModel baseModelName", func(t *testing.T) {
		obj := model(ns, "base")
		require.NoError(t, c.Create(ctx, obj))
		obj.Spec.BaseModelName = "other"
		requireCELDenied(t, c.Update(ctx, obj), "baseModelName is immutable")
	})
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
