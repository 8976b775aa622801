package validation

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

func TestDenialMessage(t *testing.T) {
	ctx := context.Background()

	t.Run("A9/kind namespace name and field path", func(t *testing.T) {
		_, err := GraphDeployment().ValidateCreate(ctx, dgd(func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Services = nil }))
		require.EqualError(t, err,
			"DynamoGraphDeployment team-a/my-graph is invalid: spec.services: Required value: at least one service is required")
	})

	t.Run("A9/multiple causes are joined", func(t *testing.T) {
		_, err := ComponentDeployment().ValidateCreate(ctx, dcd(func(d *v1alpha1.DynamoComponentDeployment) {
			d.Spec.Replicas = ptr.To[int32](-1)
			d.Spec.Ingress = &v1alpha1.IngressSpec{Enabled: true}
		}))
		require.EqualError(t, err, "DynamoComponentDeployment team-a/decode is invalid: "+
			"spec.replicas: Invalid value: -1: must be greater than or equal to 0; "+
			"spec.ingress.host: Required value: required when ingress is enabled")
	})

	t.Run("A9/status details carry group kind name and causes", func(t *testing.T) {
		_, err := Model().ValidateUpdate(ctx, model(), model(func(m *v1alpha1.DynamoModel) {
			m.Spec.ModelName = ""
			m.Spec.BaseModelName = "other"
		}))
		var status *apierrors.StatusError
		require.ErrorAs(t, err, &status)
		assert.True(t, apierrors.IsInvalid(err))
		assert.Equal(t, &metav1.StatusDetails{
			Group: "nvidia.com",
			Kind:  "DynamoModel",
			Name:  "llama",
			Causes: []metav1.StatusCause{
				{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value", Field: "spec.modelName"},
				{Type: CauseTypeFieldValueImmutable, Message: `Invalid value: "other": field is immutable (was "meta-llama/Llama-3-8B")`, Field: "spec.baseModelName"},
			},
		}, status.ErrStatus.Details)
	})

	t.Run("A9/namespace and name from the request when the object has none", func(t *testing.T) {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "team-b", Operation: admissionv1.Create}}
		obj := dgdr(func(r *v1beta1.DynamoGraphDeploymentRequest) {
			r.Namespace, r.Name, r.GenerateName = "", "", "profile-"
			r.Spec.Backend = v1beta1.BackendAuto
		})
		_, err := GraphDeploymentRequest().ValidateCreate(admission.NewContextWithRequest(ctx, req), obj)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "DynamoGraphDeploymentRequest team-b/profile-* is invalid: spec.backend: ")
	})
}

// TestBeingDeleted covers A10: once an object is being deleted, updates (finalizer removal)
// are admitted even if its spec would be denied.
func TestBeingDeleted(t *testing.T) {
	ctx := context.Background()
	deleting := metav1.Now()

	t.Run("A10/finalizer removal on a graph whose spec is now invalid", func(t *testing.T) {
		old := dgd(func(d *v1alpha1.DynamoGraphDeployment) {
			d.Finalizers = []string{v1alpha1.DynamoGraphDeploymentFinalizer}
			d.DeletionTimestamp = &deleting
			d.Spec.Restart = &v1alpha1.Restart{}
		})
		updated := old.DeepCopy()
		updated.Finalizers = nil

		_, err := GraphDeployment().ValidateUpdate(ctx, old, updated)
		require.NoError(t, err)

		// The same update of an object not being deleted is denied: the admission above is
		// owed to the deletion, not to a lenient rule.
		updated.DeletionTimestamp = nil
		_, err = GraphDeployment().ValidateUpdate(ctx, old, updated)
		require.Error(t, err)
	})

	t.Run("A10/every kind skips objects being deleted", func(t *testing.T) {
		_, err := ComponentDeployment().ValidateUpdate(ctx, dcd(), dcd(func(d *v1alpha1.DynamoComponentDeployment) {
			d.DeletionTimestamp = &deleting
			d.Spec.BackendFramework = "sglang"
		}))
		require.NoError(t, err)
		_, err = Model().ValidateUpdate(ctx, model(), model(func(m *v1alpha1.DynamoModel) {
			m.DeletionTimestamp = &deleting
			m.Spec.ModelType = v1alpha1.ModelTypeLoRA
		}))
		require.NoError(t, err)
		_, err = GraphDeploymentRequest().ValidateUpdate(ctx, dgdr(inPhase(v1beta1.PhaseDeployed)),
			dgdr(func(r *v1beta1.DynamoGraphDeploymentRequest) {
				r.DeletionTimestamp = &deleting
				r.Spec.Model = "other"
			}))
		assert.NoError(t, err)
	})

	t.Run("A10/deletes are never denied", func(t *testing.T) {
		_, err := GraphDeployment().ValidateDelete(ctx, dgd(func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Services = nil }))
		assert.NoError(t, err)
	})
}
