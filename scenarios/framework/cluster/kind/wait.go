package kind

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

// waitClusterReady waits, within timeout in all, until /readyz answers ok, every node is Ready
// and the default ServiceAccount exists (pods cannot be created before it).
func waitClusterReady(ctx context.Context, rc *rest.Config, timeout time.Duration) error {
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	if err := cluster.WaitAPIServerReady(ctx, kube, timeout); err != nil {
		return err
	}
	if err := cluster.WaitNodesReady(ctx, kube, time.Until(deadline)); err != nil {
		return err
	}
	return cluster.WaitDefaultServiceAccount(ctx, kube, time.Until(deadline))
}
