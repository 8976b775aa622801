package procnode

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func serverPort(t *testing.T, srv *httptest.Server) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)
	return n
}

func TestHTTPProbeSucceedsOn2xx3xxAndFailsOtherwise(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Check") != "yes" || !strings.HasPrefix(r.UserAgent(), "kube-probe/") {
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/bad", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &corev1.Container{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: clampInt32(serverPort(t, srv))}}}
	target := probeTarget{podIP: "127.0.0.1", container: c}

	ok := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/ok", Port: intstr.FromString("http"), HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Check", Value: "yes"}}}}}
	if err := probeOnce(context.Background(), ok, target); err != nil {
		t.Fatalf("probe of /ok via the named port: %v", err)
	}
	bad := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/bad", Port: intstr.FromString("http")}}}
	err := probeOnce(context.Background(), bad, target)
	if err == nil || !strings.Contains(err.Error(), "statuscode: 503") {
		t.Fatalf("probe of /bad = %v, want a 503 failure", err)
	}
}

func TestHTTPSProbeDoesNotVerifyCertificates(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	p := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/", Port: intstr.FromInt(serverPort(t, srv)), Scheme: corev1.URISchemeHTTPS}}}
	if err := probeOnce(context.Background(), p, probeTarget{podIP: "127.0.0.1", container: &corev1.Container{}}); err != nil {
		t.Fatalf("HTTPS probe against a self-signed server: %v", err)
	}
}

func TestTCPProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	target := probeTarget{podIP: "127.0.0.1", container: &corev1.Container{}}
	p := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(port)}}}
	if err := probeOnce(context.Background(), p, target); err != nil {
		t.Fatalf("TCP probe of a listener: %v", err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if err := probeOnce(context.Background(), p, target); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("TCP probe of a closed port = %v, want connection refused", err)
	}
}

func TestProbeStateAppliesThresholds(t *testing.T) {
	p := &corev1.Probe{SuccessThreshold: 2, FailureThreshold: 3}
	readiness := newProbeState(p, readinessProbe)
	steps := []struct {
		ok, want bool
	}{{true, false}, {true, true}, {false, true}, {false, true}, {false, false}, {true, false}, {true, true}}
	for i, s := range steps {
		if got := readiness.observe(s.ok); got != s.want {
			t.Fatalf("step %d (ok=%v): ready=%v, want %v", i, s.ok, got, s.want)
		}
	}
	if !newProbeState(p, livenessProbe).healthy {
		t.Fatal("a liveness probe must start healthy")
	}
	if newProbeState(p, startupProbe).healthy {
		t.Fatal("a startup probe must start unproven")
	}
}
