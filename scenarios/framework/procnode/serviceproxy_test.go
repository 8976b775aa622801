package procnode

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

const proxyTestIP = "127.0.178.10"

type proxyFixture struct {
	services, slices, pods cache.Indexer
	proxy                  *serviceProxy
}

func newProxyFixture(t *testing.T, fromSlices bool) *proxyFixture {
	t.Helper()
	f := &proxyFixture{
		services: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		slices:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		pods:     cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
	}
	_, cidr, _ := net.ParseCIDR("127.0.178.0/24")
	if fromSlices {
		f.proxy = newServiceProxy(cidr, corelisters.NewServiceLister(f.services), discoverylisters.NewEndpointSliceLister(f.slices), nil)
	} else {
		f.proxy = newServiceProxy(cidr, corelisters.NewServiceLister(f.services), nil, corelisters.NewPodLister(f.pods))
	}
	t.Cleanup(f.proxy.close)
	return f
}

func freeServicePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(proxyTestIP, "0"))
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

func backend(t *testing.T, body string) (string, int) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }))
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)
	return host, n
}

func service(port int, target intstr.IntOrString) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook", Namespace: "ns"},
		Spec: corev1.ServiceSpec{
			ClusterIP: proxyTestIP,
			Selector:  map[string]string{"app": "op"},
			Ports:     []corev1.ServicePort{{Name: "https", Port: clampInt32(port), TargetPort: target}},
		},
	}
}

func slice(ip string, port int, ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "webhook-abc", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "webhook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(clampInt32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
	}
}

// get uses a fresh connection each time: a kept-alive connection, like an established one
// through kube-proxy, outlives the Service's endpoints.
func get(t *testing.T, addr string) (string, error) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }() // read to the end below
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestServiceProxyListensOnlyWhileAnEndpointIsReady(t *testing.T) {
	f := newProxyFixture(t, true)
	ip, port := backend(t, "from the pod")
	svcPort := freeServicePort(t)
	addr := net.JoinHostPort(proxyTestIP, strconv.Itoa(svcPort))
	_ = f.services.Add(service(svcPort, intstr.FromString("webhook-server")))

	_ = f.slices.Add(slice(ip, port, false))
	f.proxy.reconcile()
	_, err := get(t, addr)
	require.Error(t, err, "with no ready endpoint: %v, want connect: connection refused", err)
	require.True(t, strings.HasSuffix(err.Error(), "connect: connection refused"), "with no ready endpoint: %v, want connect: connection refused", err)

	_ = f.slices.Update(slice(ip, port, true))
	f.proxy.reconcile()
	body, err := get(t, addr)
	require.NoError(t, err, "with a ready endpoint: %q, %v", body, err)
	require.Equal(t, "from the pod", body, "with a ready endpoint: %q, %v", body, err)

	_ = f.slices.Delete(slice(ip, port, true))
	f.proxy.reconcile()
	_, err = get(t, addr)
	require.Error(t, err, "after the endpoint went away: %v, want connect: connection refused", err)
	require.True(t, strings.HasSuffix(err.Error(), "connect: connection refused"), "after the endpoint went away: %v, want connect: connection refused", err)
}

func TestServiceProxyIgnoresClusterIPsOutsideItsRange(t *testing.T) {
	f := newProxyFixture(t, true)
	svc := service(443, intstr.FromInt(9443))
	svc.Spec.ClusterIP = "10.96.0.10"
	_ = f.services.Add(svc)
	_ = f.slices.Add(slice("10.244.0.5", 9443, true))
	got := f.proxy.desired()
	require.Empty(t, got, "desired listeners for a ClusterIP outside the range: %v", got)
}

func TestServiceProxyWithoutSlicesResolvesNamedTargetPortsFromPods(t *testing.T) {
	f := newProxyFixture(t, false)
	ip, port := backend(t, "host-network pod")
	svcPort := freeServicePort(t)
	_ = f.services.Add(service(svcPort, intstr.FromString("webhook-server")))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "op-0", Namespace: "ns", Labels: map[string]string{"app": "op"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "op", Ports: []corev1.ContainerPort{
			{Name: "webhook-server", ContainerPort: clampInt32(port)}}}}},
		Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	_ = f.pods.Add(pod)
	f.proxy.reconcile()
	addr := net.JoinHostPort(proxyTestIP, strconv.Itoa(svcPort))
	body, err := get(t, addr)
	require.NoError(t, err, "through the Service: %q, %v", body, err)
	require.Equal(t, "host-network pod", body, "through the Service: %q, %v", body, err)
	terminating := pod.DeepCopy()
	terminating.DeletionTimestamp = ptr.To(metav1.Now())
	_ = f.pods.Update(terminating)
	f.proxy.reconcile()
	_, err = get(t, addr)
	require.Error(t, err, "with only a terminating pod: %v, want connect: connection refused", err)
	require.True(t, strings.HasSuffix(err.Error(), "connect: connection refused"), "with only a terminating pod: %v, want connect: connection refused", err)
}
