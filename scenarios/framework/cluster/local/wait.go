package local

import (
	"context"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// clusterClient is the client a local cluster's readiness waits use.
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

// readyFileInterval is how often waitNodeReady looks for the node agent's ready file.
const readyFileInterval = 50 * time.Millisecond

// waitNodeReady waits, within timeout in all, for the node agent's ready file (its listeners are
// up) and for the Node's Ready condition.
func (c *clusterClient) waitNodeReady(ctx context.Context, name, readyFile string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	err := poll.UntilEvery(ctx, "the node agent's ready file "+readyFile, readyFileInterval, timeout, func(context.Context) (bool, string, error) {
		_, err := os.Stat(readyFile)
		return err == nil, "not written yet", nil
	})
	if err != nil {
		return err
	}
	return cluster.WaitNodesReady(ctx, c.kube, time.Until(deadline), name)
}
