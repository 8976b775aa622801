package kind

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// waitClusterReady waits until /readyz answers ok, every node is Ready and the default
// ServiceAccount exists (pods cannot be created before it).
func waitClusterReady(ctx context.Context, rc *rest.Config, timeout time.Duration) error {
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	last := "no answer yet"
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			last = fmt.Sprintf("/readyz: %v %s", err, body)
			return false, nil
		}
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			last = "listing nodes: " + err.Error()
			return false, nil
		}
		if len(nodes.Items) == 0 {
			last = "no node registered"
			return false, nil
		}
		for _, n := range nodes.Items {
			if !nodeReady(&n) {
				last = "node " + n.Name + " is not Ready"
				return false, nil
			}
		}
		if _, err := kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			last = "ServiceAccount default/default: " + err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting %s for the cluster to be ready: %w (last: %s)", timeout, err, last)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
