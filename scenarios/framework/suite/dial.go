package suite

import (
	"context"
	"fmt"
	"net"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DialService opens a TCP connection to port of Service ns/name the way the API server reaches
// a webhook — its ClusterIP through the cluster's Service routing — however the provider gets
// there (from this machine on local, from inside a node on kind, a port-forward to a ready
// endpoint on existing). It never dials a cluster address from this machine unless
// ServiceNetworkFromHost says it may.
func (c *Cluster) DialService(ctx context.Context, ns, name string, port int32) (net.Conn, error) {
	svc, err := c.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting Service %s/%s: %w", ns, name, err)
	}
	conn, err := c.backend.DialService(ctx, svc.Spec.ClusterIP, port)
	if err != nil {
		return nil, fmt.Errorf("connecting to Service %s/%s port %d: %w", ns, name, port, err)
	}
	return conn, nil
}
