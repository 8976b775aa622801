package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// readyInterval is how often the readiness waits look again: they stand between a provider
// starting a cluster and the cluster being ready, so they look often.
const readyInterval = 50 * time.Millisecond

// WaitAPIServerReady waits until the API server's /readyz answers ok.
func WaitAPIServerReady(ctx context.Context, kube kubernetes.Interface, timeout time.Duration) error {
	readyz := func() *rest.Request { return kube.Discovery().RESTClient().Get().AbsPath("/readyz") }
	return poll.UntilEvery(ctx, "kube-apiserver "+readyz().URL().String()+" to answer ok", readyInterval, timeout, func(ctx context.Context) (bool, string, error) {
		body, err := readyz().DoRaw(ctx)
		if err != nil {
			return false, fmt.Sprintf("%v %s", err, body), nil
		}
		return string(body) == "ok", string(body), nil
	})
}

// WaitNodesReady waits until the nodes named are Ready or, with no name given, until at least
// one node is registered and every registered node is Ready.
func WaitNodesReady(ctx context.Context, kube kubernetes.Interface, timeout time.Duration, names ...string) error {
	what := "every node to be Ready"
	if len(names) > 0 {
		what = "Node " + strings.Join(names, ", ") + " to be Ready"
	}
	return poll.UntilEvery(ctx, what, readyInterval, timeout, func(ctx context.Context) (bool, string, error) {
		var nodes []corev1.Node
		if len(names) == 0 {
			list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "listing nodes: " + err.Error(), nil
			}
			if len(list.Items) == 0 {
				return false, "no node registered", nil
			}
			nodes = list.Items
		}
		for _, name := range names {
			n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			nodes = append(nodes, *n)
		}
		for _, n := range nodes {
			if !NodeReady(&n) {
				return false, "node " + n.Name + " " + readyState(&n), nil
			}
		}
		return true, "", nil
	})
}

// NodeReady says whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func readyState(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return fmt.Sprintf("Ready=%s (%s)", c.Status, c.Message)
		}
	}
	return "has no Ready condition"
}

// WaitDefaultServiceAccount waits for ServiceAccount default/default: the ServiceAccount
// admission plugin rejects pods created before it exists.
func WaitDefaultServiceAccount(ctx context.Context, kube kubernetes.Interface, timeout time.Duration) error {
	return poll.UntilEvery(ctx, "ServiceAccount default/default", readyInterval, timeout, func(ctx context.Context) (bool, string, error) {
		_, err := kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}
