package release

import (
	"context"
	"fmt"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// What a rollout does to any Deployment, known by its name alone (a target's, whose pods carry
// whatever labels its chart gives them); the release's own operator has the same by release.

// DeploymentPods lists the pods Deployment ns/name selects, terminating ones included.
func DeploymentPods(ctx context.Context, kube kubernetes.Interface, ns, name string) ([]corev1.Pod, error) {
	d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting Deployment %s/%s: %w", ns, name, err)
	}
	sel := metav1.FormatLabelSelector(d.Spec.Selector)
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of Deployment %s/%s (%s): %w", ns, name, sel, err)
	}
	return pods.Items, nil
}

// DeploymentPodUIDs lists the UIDs of Deployment ns/name's pods: what a restart must replace
// (DeploymentPodsReplaced).
func DeploymentPodUIDs(ctx context.Context, kube kubernetes.Interface, ns, name string) (map[types.UID]bool, error) {
	pods, err := DeploymentPods(ctx, kube, ns, name)
	if err != nil {
		return nil, err
	}
	return uidsOf(pods), nil
}

// DeploymentPodsReplaced holds once none of Deployment ns/name's pods is one of before: a pod
// still terminating is not replaced yet. It reports the old pods left and every pod's state.
func DeploymentPodsReplaced(kube kubernetes.Interface, ns, name string, before map[types.UID]bool) poll.Condition {
	return replaced(before, func(ctx context.Context) ([]corev1.Pod, error) { return DeploymentPods(ctx, kube, ns, name) })
}

// ScaleDeployment does `kubectl scale --replicas=n` and waits: for 0, until none of the
// Deployment's pods is left (terminating ones included); otherwise until it is Available with
// n replicas (WaitDeploymentAvailable).
func ScaleDeployment(ctx context.Context, kube kubernetes.Interface, ns, name string, n int32, timeout time.Duration) error {
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	if _, err := kube.AppsV1().Deployments(ns).UpdateScale(ctx, name, scale, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scaling Deployment %s/%s to %d replicas: %w", ns, name, n, err)
	}
	if n > 0 {
		return WaitDeploymentAvailable(ctx, kube, ns, name, timeout)
	}
	return poll.Until(ctx, fmt.Sprintf("the pods of Deployment %s/%s, scaled to 0, to be gone", ns, name), timeout, func(ctx context.Context) (bool, string, error) {
		pods, err := DeploymentPods(ctx, kube, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		var left []string
		for _, p := range pods {
			left = append(left, PodState(&p))
		}
		return len(left) == 0, fmt.Sprintf("pods left: %v", left), nil
	})
}

func uidsOf(pods []corev1.Pod) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, p := range pods {
		out[p.UID] = true
	}
	return out
}
