package webhook

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// DefaultDrainPeriod is how long a stopping webhook server keeps serving, answering every
// request with `Connection: close`, before it shuts down (Draining).
const DefaultDrainPeriod = 2 * time.Second

// Draining makes s stop without failing a request the API server sends over a connection it
// keeps alive. The API server reuses its HTTP/1.1 connections to a webhook; a server that shuts
// down closes the idle ones, and a request the API server writes onto one of them at that
// moment fails with `EOF` — and an admission webhook call is not retried, so with failurePolicy
// Fail the user's request fails. A pod's connections outlive its removal from the Service's
// endpoints (the preStop delay only stops new ones), so every rollout risked this: without the
// drain, 2 of 4 runs of scenario P4 (five restarts of two replicas under 50 admissions/s) failed
// 1–2 admissions with `EOF`.
//
// When ctx ends, the wrapped server first drains for period: it keeps serving, and every
// response carries `Connection: close`, so each connection still in use is closed by the
// server right after a response, which the client reads before it could reuse the connection.
// Only then is s stopped; the connections left to close are those no request used during the
// drain.
func Draining(s ctrlwebhook.Server, period time.Duration, log logr.Logger) ctrlwebhook.Server {
	return &drainingServer{Server: s, period: period, log: log}
}

type drainingServer struct {
	ctrlwebhook.Server
	period   time.Duration
	log      logr.Logger
	draining atomic.Bool
}

// Register serves hook at path, closing the connection after each response once draining.
func (s *drainingServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		hook.ServeHTTP(w, r)
	}))
}

// Start runs the wrapped server until ctx ends, then drains for the period and stops it.
func (s *drainingServer) Start(ctx context.Context) error {
	serverCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	done := make(chan error, 1)
	go func() { done <- s.Server.Start(serverCtx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("draining webhook connections before shutting down: every response closes its connection", "for", s.period.String())
	timer := time.NewTimer(s.period)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
	}
	stop()
	return <-done
}
