// Package controller holds the operator's reconcilers. They do no workload management: they
// keep finalizers and status real so that admission behaviour around deletion (A10, T12) and
// status-dependent rules (A6) can be exercised against a live operator.
package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook"
)

// Graph states reported in DynamoGraphDeployment.status.state.
const (
	GraphStateSuccessful = "successful"
	GraphStateDeleting   = "deleting"
)

// excludedRequeue is how soon a cluster-wide operator looks again at an object in a namespace
// that a namespace-restricted operator currently owns (its Lease may expire).
const excludedRequeue = 10 * time.Second

// DynamoGraphDeploymentReconciler adds the operator's finalizer to every graph, reports a
// status, and removes the finalizer once the graph is being deleted.
type DynamoGraphDeploymentReconciler struct {
	Client client.Client
	// Exclusions lists namespaces a namespace-restricted operator owns; nil means none.
	Exclusions webhook.ExclusionChecker
}

// SetupWithManager registers the reconciler.
func (r *DynamoGraphDeploymentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.DynamoGraphDeployment{}).
		Named("dynamographdeployment").
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *DynamoGraphDeploymentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.Exclusions != nil && r.Exclusions.Excluded(req.Namespace) {
		return ctrl.Result{RequeueAfter: excludedRequeue}, nil
	}
	var dgd v1alpha1.DynamoGraphDeployment
	if err := r.Client.Get(ctx, req.NamespacedName, &dgd); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if !dgd.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(&dgd, v1alpha1.DynamoGraphDeploymentFinalizer) {
			return ctrl.Result{}, nil
		}
		// Nothing to clean up yet (no workloads are managed); the finalizer still proves that
		// removing it is never blocked by admission.
		orig := dgd.DeepCopy()
		controllerutil.RemoveFinalizer(&dgd, v1alpha1.DynamoGraphDeploymentFinalizer)
		if err := r.patchFinalizers(ctx, &dgd, orig); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("removing finalizer from DynamoGraphDeployment %s: %w", req.NamespacedName, err)
		}
		log.FromContext(ctx).Info("finalizer removed", "name", dgd.Name, "namespace", dgd.Namespace)
		return ctrl.Result{}, nil
	}

	if orig := dgd.DeepCopy(); controllerutil.AddFinalizer(&dgd, v1alpha1.DynamoGraphDeploymentFinalizer) {
		if err := r.patchFinalizers(ctx, &dgd, orig); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer to DynamoGraphDeployment %s: %w", req.NamespacedName, err)
		}
	}
	if dgd.Status.State == GraphStateSuccessful && dgd.Status.ObservedGeneration == dgd.Generation {
		return ctrl.Result{}, nil
	}
	dgd.Status.State = GraphStateSuccessful
	dgd.Status.ObservedGeneration = dgd.Generation
	if err := r.Client.Status().Update(ctx, &dgd); err != nil {
		return ctrl.Result{}, fmt.Errorf("updating status of DynamoGraphDeployment %s: %w", req.NamespacedName, err)
	}
	return ctrl.Result{}, nil
}

// patchFinalizers writes dgd's finalizers and nothing else: a merge patch against orig, with
// orig's resourceVersion so a concurrent change conflicts instead of being overwritten. An
// Update would send the whole object as this operator's Go type knows it, dropping what the
// user wrote that the type does not carry (unknown fields, explicit zero values such as
// ingress.enabled: false).
func (r *DynamoGraphDeploymentReconciler) patchFinalizers(ctx context.Context, dgd, orig *v1alpha1.DynamoGraphDeployment) error {
	return r.Client.Patch(ctx, dgd, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}
