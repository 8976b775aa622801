package local

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// clusterClient waits for the things "ready" means for a local cluster.
type clusterClient struct {
	rest *rest.Config
	kube kubernetes.Interface
}

func newClusterClient(rc *rest.Config) (*clusterClient, error) {
	// Readiness polling must not queue behind client-side rate limits.
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 100, 200
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &clusterClient{rest: rc, kube: kube}, nil
}

const pollInterval = 50 * time.Millisecond

func (c *clusterClient) waitReadyz(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		body, err := c.kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		return string(body) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("waiting for kube-apiserver /readyz at %s (last error: %s): %w", c.rest.Host, last, err)
	}
	return nil
}

// waitNodeReady waits for the node agent's ready file (when given: its listeners are up) and
// for the Node's Ready condition.
func (c *clusterClient) waitNodeReady(ctx context.Context, name, readyFile string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if readyFile != "" {
			if _, err := os.Stat(readyFile); err != nil {
				last = "ready file " + readyFile + " not written yet"
				return false, nil
			}
		}
		node, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s (%s)", cond.Status, cond.Message)
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		last = "no Ready condition"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Node %s to be Ready (%s): %w", name, last, err)
	}
	return nil
}

// waitDefaultServiceAccount waits for default/default: pods created before it exists are
// rejected by the ServiceAccount admission plugin.
func (c *clusterClient) waitDefaultServiceAccount(ctx context.Context, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := c.kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for ServiceAccount default/default: %w", err)
	}
	return nil
}
