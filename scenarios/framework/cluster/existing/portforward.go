package existing

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// DialService reaches a Service the only way a machine outside the cluster network can: a
// port-forward through the API server to one of its ready endpoint pods, on the port the
// Service forwards port to. The pod serves what the Service would; nothing is sent to the
// cluster's addresses from this machine.
func (b *backend) DialService(ctx context.Context, clusterIP string, port int32) (net.Conn, error) {
	pod, podPort, err := b.endpointFor(ctx, clusterIP, port)
	if err != nil {
		return nil, err
	}
	return b.forward(ctx, pod, podPort)
}

// DialPod port-forwards to port of pod through the API server.
func (b *backend) DialPod(ctx context.Context, pod *corev1.Pod, port int32) (net.Conn, error) {
	return b.forward(ctx, pod, port)
}

// forward opens a port-forward through the API server to podPort of pod and a connection
// through it; closing the connection ends the port-forward.
func (b *backend) forward(ctx context.Context, pod *corev1.Pod, podPort int32) (net.Conn, error) {
	transport, upgrader, err := spdy.RoundTripperFor(b.rest)
	if err != nil {
		return nil, err
	}
	url := b.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(int(podPort))}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, err
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-failed:
		return nil, fmt.Errorf("port-forward to pod %s/%s port %d: %w", pod.Namespace, pod.Name, podPort, err)
	case <-ctx.Done():
		close(stop)
		return nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		close(stop)
		return nil, fmt.Errorf("port-forward to pod %s/%s: no local port: %v", pod.Namespace, pod.Name, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))))
	if err != nil {
		close(stop)
		return nil, err
	}
	return &forwardedConn{Conn: conn, stop: stop}, nil
}

// forwardedConn ends its port-forward when closed.
type forwardedConn struct {
	net.Conn
	stop chan struct{}
}

func (c *forwardedConn) Close() error {
	err := c.Conn.Close()
	close(c.stop)
	return err
}

// endpointFor finds the Service with clusterIP and a ready endpoint pod behind port, with the
// pod's port.
func (b *backend) endpointFor(ctx context.Context, clusterIP string, port int32) (*corev1.Pod, int32, error) {
	svcs, err := b.kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, fmt.Errorf("listing Services: %w", err)
	}
	for _, svc := range svcs.Items {
		if svc.Spec.ClusterIP != clusterIP {
			continue
		}
		var portName string
		found := false
		for _, sp := range svc.Spec.Ports {
			if sp.Port == port {
				portName, found = sp.Name, true
			}
		}
		if !found {
			return nil, 0, fmt.Errorf("no port %d in Service %s/%s", port, svc.Namespace, svc.Name)
		}
		slices, err := b.kube.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		if err != nil {
			return nil, 0, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		for _, s := range slices.Items {
			podPort, ok := slicePort(s.Ports, portName)
			if !ok {
				continue
			}
			for _, e := range s.Endpoints {
				if e.TargetRef == nil || e.TargetRef.Kind != "Pod" || (e.Conditions.Ready != nil && !*e.Conditions.Ready) {
					continue
				}
				pod, err := b.kube.CoreV1().Pods(svc.Namespace).Get(ctx, e.TargetRef.Name, metav1.GetOptions{})
				if err == nil {
					return pod, podPort, nil
				}
			}
		}
		return nil, 0, fmt.Errorf("dial tcp %s: Service %s/%s has no ready endpoint: connection refused", net.JoinHostPort(clusterIP, strconv.Itoa(int(port))), svc.Namespace, svc.Name)
	}
	return nil, 0, fmt.Errorf("no Service has ClusterIP %s", clusterIP)
}

func slicePort(ports []discoveryv1.EndpointPort, name string) (int32, bool) {
	for _, p := range ports {
		if p.Port != nil && (p.Name == nil && name == "" || p.Name != nil && *p.Name == name) {
			return *p.Port, true
		}
	}
	return 0, false
}
