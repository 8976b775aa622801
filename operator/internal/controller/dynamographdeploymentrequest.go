package controller

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook"
)

// DynamoGraphDeploymentRequestReconciler moves new requests to phase Pending. Profiling itself
// is out of scope; tests drive later phases through the status subresource.
type DynamoGraphDeploymentRequestReconciler struct {
	Client client.Client
	// Exclusions lists namespaces a namespace-restricted operator owns; nil means none.
	Exclusions webhook.ExclusionChecker
}

// SetupWithManager registers the reconciler.
func (r *DynamoGraphDeploymentRequestReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1beta1.DynamoGraphDeploymentRequest{}).
		Named("dynamographdeploymentrequest").
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *DynamoGraphDeploymentRequestReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.Exclusions != nil && r.Exclusions.Excluded(req.Namespace) {
		return ctrl.Result{RequeueAfter: excludedRequeue}, nil
	}
	var dgdr v1beta1.DynamoGraphDeploymentRequest
	if err := r.Client.Get(ctx, req.NamespacedName, &dgdr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if dgdr.Status.Phase != "" || !dgdr.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	dgdr.Status.Phase = v1beta1.PhasePending
	dgdr.Status.ObservedGeneration = dgdr.Generation
	if err := r.Client.Status().Update(ctx, &dgdr); err != nil {
		return ctrl.Result{}, fmt.Errorf("updating status of DynamoGraphDeploymentRequest %s: %w", req.NamespacedName, err)
	}
	return ctrl.Result{}, nil
}
