package doctor

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator/internal/testcluster"
)

// serviceCIDR is the test API server's Service range: loopback, so the API server dials a
// webhook Service at ClusterIP:port and a listener of this process answers, as in a cluster
// (the operator's own end-to-end test uses 127.0.100.0/24).
const serviceCIDR = "127.0.101.0/24"

// nodeName is the Node the tests' Pods are bound to; its kubelet is testKubelet.
const nodeName = "doctor-node"

var (
	// env is the package's one control plane (etcd + kube-apiserver), shared by the tests
	// that need an API server: SubjectAccessReviews, pods/log, dry-runs.
	env *testcluster.Env
	// kubelet serves the container logs the API server proxies for pods/log.
	kubelet *testKubelet
)

func TestMain(m *testing.M) {
	var err error
	env, err = testcluster.New(testcluster.WithServiceCIDR(serviceCIDR))
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test control plane:", err)
		os.Exit(1)
	}
	kubelet = startKubelet()
	if err := registerNode(context.Background(), env.Client, kubelet.port); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	kubelet.srv.Close()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test control plane:", err)
	}
	os.Exit(code)
}

// testKubelet answers the kubelet API's GET /containerLogs/{ns}/{pod}/{container}, which
// is what the API server calls for pods/log; nothing else of a kubelet is needed here.
type testKubelet struct {
	srv      *httptest.Server
	port     int32
	mu       sync.Mutex
	logs     map[string]func() string // "ns/pod/container" -> log content
	forwards map[string]func() string // "ns/pod/port" -> the address behind the Pod's port
}

func startKubelet() *testKubelet {
	k := &testKubelet{logs: map[string]func() string{}, forwards: map[string]func() string{}}
	k.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if nsPod, ok := strings.CutPrefix(r.URL.Path, "/portForward/"); ok {
			k.portForward(w, r, nsPod)
			return
		}
		key, ok := strings.CutPrefix(r.URL.Path, "/containerLogs/")
		k.mu.Lock()
		content, found := k.logs[key]
		k.mu.Unlock()
		if !ok || !found {
			http.Error(w, "container not found: "+r.URL.Path, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(content()))
	}))
	_, p, _ := net.SplitHostPort(k.srv.Listener.Addr().String())
	var port int32
	_, _ = fmt.Sscan(p, &port)
	k.port = port
	return k
}

func (k *testKubelet) serve(namespace, pod, container string, content func() string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.logs[namespace+"/"+pod+"/"+container] = content
}

// forwardTo makes port-forwards to the Pod's port lead to the address backend returns (at the
// time of each connection).
func (k *testKubelet) forwardTo(namespace, pod string, port int32, backend func() string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.forwards[fmt.Sprintf("%s/%s/%d", namespace, pod, port)] = backend
}

// portForward is the kubelet's POST /portForward/{ns}/{pod}, which the API server proxies
// pods/portforward to (it speaks SPDY to the kubelet, whatever the client used): per
// forwarded connection the client opens an error and a data stream with the same requestID;
// the kubelet connects to the Pod's port and copies, or writes why it could not to the error
// stream (what the client's forwarder logs as "an error occurred forwarding").
func (k *testKubelet) portForward(w http.ResponseWriter, r *http.Request, nsPod string) {
	if _, err := httpstream.Handshake(r, w, []string{portforward.PortForwardProtocolV1Name}); err != nil {
		return
	}
	done := make(chan struct{})
	defer close(done)
	streams := make(chan httpstream.Stream)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
		select {
		case streams <- s:
		case <-done:
		}
		return nil
	})
	if conn == nil {
		return
	}
	// A failed close has no one to be reported to: the API server's side is gone or done.
	defer func() { _ = conn.Close() }()
	pairs := map[string][2]httpstream.Stream{} // requestID -> error, data
	for {
		select {
		case <-conn.CloseChan():
			return
		case s := <-streams:
			id := s.Headers().Get(corev1.PortForwardRequestIDHeader)
			p := pairs[id]
			switch s.Headers().Get(corev1.StreamType) {
			case corev1.StreamTypeError:
				p[0] = s
			case corev1.StreamTypeData:
				p[1] = s
			default:
				_ = s.Reset()
				continue
			}
			if p[0] == nil || p[1] == nil {
				pairs[id] = p
				continue
			}
			delete(pairs, id)
			go k.forwardStreams(nsPod, p[0], p[1])
		}
	}
}

func (k *testKubelet) forwardStreams(nsPod string, errStream, data httpstream.Stream) {
	// Closing the streams ends this forward; a failed close has no one to be reported to.
	defer func() { _ = data.Close(); _ = errStream.Close() }()
	port := data.Headers().Get(corev1.PortHeader)
	k.mu.Lock()
	backend, ok := k.forwards[nsPod+"/"+port]
	k.mu.Unlock()
	if !ok {
		_, _ = fmt.Fprintf(errStream, "error forwarding port %s to pod %s: the pod does not listen on it", port, nsPod) // best effort: the client may be gone
		return
	}
	up, err := net.DialTimeout("tcp", backend(), 5*time.Second)
	if err != nil {
		_, _ = fmt.Fprintf(errStream, "error forwarding port %s to pod %s, uid : failed to connect to localhost:%s inside the pod's network namespace: %v", port, nsPod, port, err)
		return
	}
	defer func() { _ = up.Close() }() // the copies below are over; the Pod's side of the test has its own checks
	copied := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, data)
		_ = up.(*net.TCPConn).CloseWrite()
		copied <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(data, up)
		copied <- struct{}{}
	}()
	<-copied
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
}

// registerNode creates the Node whose kubelet endpoint is 127.0.0.1:port, so pods/log of
// Pods bound to it reach testKubelet (the API server skips verifying a kubelet's certificate
// when it has no --kubelet-certificate-authority).
func registerNode(ctx context.Context, c client.Client, port int32) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if err := c.Create(ctx, node); err != nil {
		return fmt.Errorf("creating Node %s: %w", nodeName, err)
	}
	node.Status = corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: port}},
		Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
	}
	if err := c.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("updating the status of Node %s: %w", nodeName, err)
	}
	return nil
}

// apply makes obj exist as given: Namespaces are created if missing, Pods (whose spec is
// immutable) are deleted and re-created, everything else is created or updated. The status
// of Pods and Deployments is written afterwards (create and update ignore it).
func apply(ctx context.Context, t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	desired := obj.DeepCopyObject().(client.Object)
	desired.SetResourceVersion("")
	switch obj.(type) {
	case *corev1.Namespace:
		if err := c.Create(ctx, desired); !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "creating Namespace %s", key.Name)
		}
		return
	case *corev1.Pod:
		err := c.Delete(ctx, obj.DeepCopyObject().(client.Object), client.GracePeriodSeconds(0))
		if err != nil && !apierrors.IsNotFound(err) {
			require.NoError(t, err, "deleting Pod %s", key)
		}
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(c.Get(ctx, key, &corev1.Pod{}))
		}, 10*time.Second, 20*time.Millisecond, "Pod %s still exists after deletion", key)
	}
	existing := obj.DeepCopyObject().(client.Object)
	err := c.Get(ctx, key, existing)
	switch {
	case apierrors.IsNotFound(err):
		// A deleted Service's ClusterIP is released asynchronously; retry until it is free.
		require.Eventually(t, func() bool {
			err = c.Create(ctx, desired)
			return err == nil || !strings.Contains(err.Error(), "already allocated")
		}, 10*time.Second, 100*time.Millisecond)
		require.NoError(t, err, "creating %T %s", obj, key)
	case err != nil:
		require.NoError(t, err, "getting %T %s", obj, key)
	default:
		desired.SetResourceVersion(existing.GetResourceVersion())
		require.NoError(t, c.Update(ctx, desired), "updating %T %s", obj, key)
	}
	if status := statusOf(obj); status != nil {
		status(desired)
		require.NoError(t, c.Status().Update(ctx, desired), "updating the status of %T %s", obj, key)
	}
}

// statusOf returns what writes obj's status onto its freshly created copy, for the kinds
// whose create drops the status (nil for the others).
func statusOf(obj client.Object) func(client.Object) {
	switch o := obj.(type) {
	case *corev1.Pod:
		st := *o.Status.DeepCopy()
		return func(f client.Object) { f.(*corev1.Pod).Status = st }
	case *appsv1.Deployment:
		st := *o.Status.DeepCopy()
		return func(f client.Object) { f.(*appsv1.Deployment).Status = st }
	}
	return nil
}
