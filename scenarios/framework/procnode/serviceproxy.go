package procnode

import (
	"errors"
	"io"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/klog/v2"
)

// serviceProxy plays kube-proxy for a loopback Service range: for every TCP Service port
// with at least one ready endpoint it listens on ClusterIP:port and forwards connections to
// the endpoints. Without a ready endpoint there is no listener, so a dial fails with
// "connect: connection refused" — what a client sees in a cluster when a Service has no
// endpoints.
type serviceProxy struct {
	serviceCIDR *net.IPNet
	services    corelisters.ServiceLister
	// Endpoints come from EndpointSlices (pods with routable IPs) or, when the node runs
	// pods on the host network and the apiserver refuses their loopback addresses in
	// EndpointSlices, from the node's own pods matching the selector.
	slices discoverylisters.EndpointSliceLister
	pods   corelisters.PodLister

	trigger chan struct{}

	mu        sync.Mutex
	listeners map[string]*serviceListener
	closed    bool
}

// serviceListener serves one ClusterIP:port.
type serviceListener struct {
	addr    string
	service string
	ln      net.Listener

	mu       sync.Mutex
	backends []string
	next     int
	conns    map[net.Conn]struct{}
}

func newServiceProxy(cidr *net.IPNet, services corelisters.ServiceLister, slices discoverylisters.EndpointSliceLister, pods corelisters.PodLister) *serviceProxy {
	return &serviceProxy{
		serviceCIDR: cidr,
		services:    services,
		slices:      slices,
		pods:        pods,
		trigger:     make(chan struct{}, 1),
		listeners:   map[string]*serviceListener{},
	}
}

// changed asks for a reconcile; informer handlers call it for every relevant event.
func (p *serviceProxy) changed() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// run reconciles on every change and every few seconds (to retry a failed listen) until
// stop is closed.
func (p *serviceProxy) run(stop <-chan struct{}) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		p.reconcile()
		select {
		case <-stop:
			return
		case <-p.trigger:
		case <-tick.C:
		}
	}
}

// reconcile makes the set of listeners match the Services and their ready endpoints.
func (p *serviceProxy) reconcile() {
	desired := p.desired()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	for addr, l := range p.listeners {
		if _, ok := desired[addr]; !ok {
			klog.V(2).InfoS("closing service listener (no ready endpoints)", "address", addr, "service", l.service)
			_ = l.ln.Close()
			delete(p.listeners, addr)
		}
	}
	for addr, want := range desired {
		if l, ok := p.listeners[addr]; ok {
			l.setBackends(want.backends)
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			klog.ErrorS(err, "listening for service", "address", addr, "service", want.service)
			continue
		}
		l := &serviceListener{addr: addr, service: want.service, ln: ln, conns: map[net.Conn]struct{}{}}
		l.setBackends(want.backends)
		p.listeners[addr] = l
		klog.V(2).InfoS("serving service", "address", addr, "service", want.service, "endpoints", want.backends)
		go l.serve()
	}
}

type serviceTarget struct {
	service  string
	backends []string
}

func (p *serviceProxy) desired() map[string]serviceTarget {
	out := map[string]serviceTarget{}
	services, err := p.services.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "listing services")
		return out
	}
	for _, svc := range services {
		ip := net.ParseIP(svc.Spec.ClusterIP)
		if ip == nil || !p.serviceCIDR.Contains(ip) {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
				continue
			}
			var backends []string
			if p.slices != nil {
				backends = p.sliceBackends(svc, sp)
			} else {
				backends = p.podBackends(svc, sp)
			}
			if len(backends) == 0 {
				continue
			}
			addr := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(sp.Port)))
			out[addr] = serviceTarget{service: svc.Namespace + "/" + svc.Name + ":" + portLabel(sp), backends: backends}
		}
	}
	return out
}

func portLabel(sp corev1.ServicePort) string {
	if sp.Name != "" {
		return sp.Name
	}
	return strconv.Itoa(int(sp.Port))
}

// sliceBackends reads ready endpoints from the Service's EndpointSlices, matching the
// Service port by name as kube-proxy does (the slice carries the resolved target port).
func (p *serviceProxy) sliceBackends(svc *corev1.Service, sp corev1.ServicePort) []string {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	slices, err := p.slices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port := -1
		for _, ep := range s.Ports {
			name := ""
			if ep.Name != nil {
				name = *ep.Name
			}
			proto := corev1.ProtocolTCP
			if ep.Protocol != nil {
				proto = *ep.Protocol
			}
			if name == sp.Name && proto == corev1.ProtocolTCP && ep.Port != nil {
				port = int(*ep.Port)
			}
		}
		if port < 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				out = append(out, net.JoinHostPort(a, strconv.Itoa(port)))
			}
		}
	}
	sort.Strings(out)
	return out
}

// podBackends selects ready, non-terminating pods itself and resolves named target ports
// through each pod's container ports.
func (p *serviceProxy) podBackends(svc *corev1.Service, sp corev1.ServicePort) []string {
	if len(svc.Spec.Selector) == 0 {
		return nil
	}
	pods, err := p.pods.Pods(svc.Namespace).List(labels.SelectorFromSet(svc.Spec.Selector))
	if err != nil {
		return nil
	}
	var out []string
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" || !podReady(pod) {
			continue
		}
		port, ok := targetPort(pod, sp)
		if !ok {
			continue
		}
		out = append(out, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)))
	}
	sort.Strings(out)
	return out
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// targetPort resolves a Service port's targetPort for one pod (numbers as is, names via
// the pod's container ports, unset as the Service port).
func targetPort(pod *corev1.Pod, sp corev1.ServicePort) (int, bool) {
	switch {
	case sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal != "":
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == sp.TargetPort.StrVal && (cp.Protocol == "" || cp.Protocol == corev1.ProtocolTCP) {
					return int(cp.ContainerPort), true
				}
			}
		}
		return 0, false
	case sp.TargetPort.IntValue() != 0:
		return sp.TargetPort.IntValue(), true
	}
	return int(sp.Port), true
}

// close stops every listener and cuts forwarded connections.
func (p *serviceProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for addr, l := range p.listeners {
		l.close()
		delete(p.listeners, addr)
	}
}

func (l *serviceListener) setBackends(b []string) {
	l.mu.Lock()
	l.backends = b
	l.mu.Unlock()
}

func (l *serviceListener) serve() {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				klog.ErrorS(err, "accepting service connection", "address", l.addr)
			}
			return
		}
		go l.forward(conn)
	}
}

// forward connects to the endpoints in round-robin order, trying each once.
func (l *serviceListener) forward(client net.Conn) {
	l.mu.Lock()
	backends := append([]string(nil), l.backends...)
	start := l.next
	l.next++
	l.conns[client] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.conns, client)
		l.mu.Unlock()
		_ = client.Close()
	}()
	for i := range backends {
		target := backends[(start+i)%len(backends)]
		backend, err := net.DialTimeout("tcp", target, 3*time.Second)
		if err != nil {
			klog.V(2).InfoS("service endpoint unreachable", "service", l.service, "endpoint", target, "err", err)
			continue
		}
		pipe(client, backend)
		return
	}
}

func (l *serviceListener) close() {
	_ = l.ln.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		_ = c.Close()
	}
}

// pipe copies both ways until both directions end, propagating half-closes.
func pipe(a, b net.Conn) {
	defer func() { _ = b.Close() }() // both directions have ended; nothing is left to flush
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}
