package main

import (
	"fmt"
	"net"
	"net/http"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The probe server's bounds. controller-runtime's own probe server bounds only the headers (32 s):
// a client that sends its headers and then trickles a body holds the connection for as long as
// it likes, because net/http reads what a handler left of a small body before it answers. The
// kubelet sends a GET without a body at once, so every request must be in within
// probeReadTimeout.
const (
	probeReadTimeout  = 10 * time.Second
	probeIdleTimeout  = 90 * time.Second
	probeShutdownWait = 5 * time.Second
)

// addProbeServer serves /healthz (liveness) and /readyz (readiness) on addr — each also at
// /<path>/<check> for one check, as controller-runtime serves them — from a server whose
// requests must arrive within probeReadTimeout, started with the manager's other HTTP servers
// (before the caches and the webhook server, so the kubelet sees the process alive early).
// addr "0" (or "") serves no probes. The manager's own probe server must be off
// (HealthProbeBindAddress "0").
func addProbeServer(mgr ctrl.Manager, addr string, liveness, readiness map[string]healthz.Checker) error {
	if addr == "" || addr == "0" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for the health probes on %s: %w", addr, err)
	}
	shutdown := probeShutdownWait
	if err := mgr.Add(&manager.Server{Name: "health probe", Server: newProbeServer(liveness, readiness, probeReadTimeout), Listener: ln, ShutdownTimeout: &shutdown}); err != nil {
		_ = ln.Close()
		return fmt.Errorf("adding the health probe server: %w", err)
	}
	return nil
}

// newProbeServer is the probe server's HTTP server: every request must be in within
// readTimeout.
func newProbeServer(liveness, readiness map[string]healthz.Checker, readTimeout time.Duration) *http.Server {
	mux := http.NewServeMux()
	for path, checks := range map[string]map[string]healthz.Checker{"/healthz": liveness, "/readyz": readiness} {
		h := http.StripPrefix(path, &healthz.Handler{Checks: checks})
		mux.Handle(path, h)
		mux.Handle(path+"/", h)
	}
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       probeIdleTimeout,
		MaxHeaderBytes:    1 << 20,
	}
}
