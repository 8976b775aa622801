package webhook

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// plainServer is a webhook.Server over plain HTTP that shuts down the way controller-runtime's
// does when its context ends (http.Server.Shutdown: listener and idle connections closed).
type plainServer struct {
	mux *http.ServeMux
	ln  net.Listener
}

var _ ctrlwebhook.Server = (*plainServer)(nil)

func newPlainServer(t *testing.T) *plainServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return &plainServer{mux: http.NewServeMux(), ln: ln}
}

func (p *plainServer) NeedLeaderElection() bool             { return false }
func (p *plainServer) Register(path string, h http.Handler) { p.mux.Handle(path, h) }
func (p *plainServer) StartedChecker() healthz.Checker      { return healthz.Ping }
func (p *plainServer) WebhookMux() *http.ServeMux           { return p.mux }

func (p *plainServer) Start(ctx context.Context) error {
	srv := &http.Server{Handler: p.mux, ReadHeaderTimeout: time.Second}
	stopped := make(chan struct{})
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.WithoutCancel(ctx))
		close(stopped)
	}()
	if err := srv.Serve(p.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-stopped
	return nil
}

func answerEmpty(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = io.WriteString(w, "{}")
}

func postJSON(c *http.Client, url string) (*http.Response, error) {
	resp, err := c.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp, nil
}

func TestDrainingServerClosesEachConnectionAfterItsResponseBeforeStopping(t *testing.T) {
	inner := newPlainServer(t)
	s := Draining(inner, 300*time.Millisecond, logr.Discard())
	s.Register("/validate", http.HandlerFunc(answerEmpty))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	url := "http://" + inner.ln.Addr().String() + "/validate"
	client := &http.Client{Transport: &http.Transport{}}

	resp, err := postJSON(client, url)
	require.NoError(t, err)
	assert.False(t, resp.Close, "expected keep-alive before the server is stopped")

	cancel()
	stopAsked := time.Now()
	require.Eventually(t, func() bool { return s.(*drainingServer).draining.Load() }, time.Second, time.Millisecond)
	resp, err = postJSON(client, url)
	require.NoError(t, err, "expected the server to keep serving while it drains")
	assert.True(t, resp.Close, "expected `Connection: close` on a response while draining")
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	select {
	case err := <-done:
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(stopAsked), 300*time.Millisecond, "expected the server to stop only after the drain period")
	case <-time.After(5 * time.Second):
		t.Fatal("the draining server did not stop within 5s of its drain period")
	}
	_, err = postJSON(client, url)
	require.Error(t, err, "expected the server to be stopped after draining")
}

// What P4 found, as a unit: clients keep their HTTP/1.1 connections to a pod alive after it left
// the Service's endpoints (new connections go to another pod), and keep sending on them while
// the pod stops. With the drain none of their requests fails.
func TestDrainingServerFailsNoRequestOfAConnectionKeptAlive(t *testing.T) {
	old, next := newPlainServer(t), newPlainServer(t)
	draining := Draining(old, 200*time.Millisecond, logr.Discard())
	draining.Register("/validate", http.HandlerFunc(answerEmpty))
	next.Register("/validate", http.HandlerFunc(answerEmpty))
	oldCtx, stopOld := context.WithCancel(context.Background())
	defer stopOld()
	nextCtx, stopNext := context.WithCancel(context.Background())
	defer stopNext()
	oldDone := make(chan error, 1)
	go func() { oldDone <- draining.Start(oldCtx) }()
	go func() { _ = next.Start(nextCtx) }()

	// The "Service": new connections go to the old pod until it is removed from the endpoints.
	var removed atomic.Bool
	dialer := &net.Dialer{}
	transport := &http.Transport{MaxIdleConnsPerHost: 8, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		if removed.Load() {
			return dialer.DialContext(ctx, network, next.ln.Addr().String())
		}
		return dialer.DialContext(ctx, network, old.ln.Addr().String())
	}}
	client := &http.Client{Transport: transport}
	const url = "http://webhook-service.test:443/validate"

	var sent, failed atomic.Int64
	var firstErr atomic.Value
	stopClients := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stopClients:
					return
				default:
				}
				sent.Add(1)
				if _, err := postJSON(client, url); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // connections to the old pod are open and in use
	removed.Store(true)                // the pod is terminating: the preStop delay runs
	time.Sleep(100 * time.Millisecond)
	stopOld() // SIGTERM
	select {
	case err := <-oldDone:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the draining server did not stop")
	}
	time.Sleep(100 * time.Millisecond)
	close(stopClients)
	wg.Wait()
	assert.Zero(t, failed.Load(), "expected no failed request of %d sent across the stop; first error: %v", sent.Load(), firstErr.Load())
	assert.Greater(t, sent.Load(), int64(100), "expected the clients to keep sending")
}
