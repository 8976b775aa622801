package procnode

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
	require.NoError(t, probeOnce(context.Background(), ok, target), "probe of /ok via the named port")
	bad := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/bad", Port: intstr.FromString("http")}}}
	err := probeOnce(context.Background(), bad, target)
	require.ErrorContains(t, err, "statuscode: 503", "probe of /bad = %v, want a 503 failure", err)
}

func TestHTTPSProbeDoesNotVerifyCertificates(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	p := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/", Port: intstr.FromInt(serverPort(t, srv)), Scheme: corev1.URISchemeHTTPS}}}
	require.NoError(t, probeOnce(context.Background(), p, probeTarget{podIP: "127.0.0.1", container: &corev1.Container{}}), "HTTPS probe against a self-signed server")
}

func TestTCPProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	target := probeTarget{podIP: "127.0.0.1", container: &corev1.Container{}}
	p := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(port)}}}
	require.NoError(t, probeOnce(context.Background(), p, target), "TCP probe of a listener")
	require.NoError(t, ln.Close())
	err = probeOnce(context.Background(), p, target)
	require.ErrorContains(t, err, "connection refused", "TCP probe of a closed port = %v, want connection refused", err)
}

func TestProbeStateAppliesThresholds(t *testing.T) {
	p := &corev1.Probe{SuccessThreshold: 2, FailureThreshold: 3}
	readiness := newProbeState(p, readinessProbe)
	steps := []struct {
		ok, want bool
	}{{true, false}, {true, true}, {false, true}, {false, true}, {false, false}, {true, false}, {true, true}}
	for i, s := range steps {
		got := readiness.observe(s.ok)
		require.Equal(t, s.want, got, "step %d (ok=%v): ready=%v, want %v", i, s.ok, got, s.want)
	}
	require.True(t, newProbeState(p, livenessProbe).healthy, "a liveness probe must start healthy")
	require.False(t, newProbeState(p, startupProbe).healthy, "a startup probe must start unproven")
}
