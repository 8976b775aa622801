package webhook

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// servingCertificate is a self-signed certificate for 127.0.0.1.
func servingCertificate(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "webhook"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startedServer is a Server on a loopback port serving /validate, stopped by stop.
type startedServer struct {
	*Server
	stop    context.CancelFunc
	stopped chan error
}

func startServer(t *testing.T, drainTimeout time.Duration) *startedServer {
	t.Helper()
	cert := servingCertificate(t)
	s := NewServer(ctrlwebhook.Options{Host: "127.0.0.1", TLSOpts: []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }
	}}}, drainTimeout, logr.Discard())
	s.Register("/validate", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "{}")
	}))
	ctx, stop := context.WithCancel(context.Background())
	started := &startedServer{Server: s, stop: stop, stopped: make(chan error, 1)}
	go func() { started.stopped <- s.Start(ctx) }()
	t.Cleanup(stop)
	require.Eventually(t, func() bool { return s.StartedChecker()(nil) == nil }, 5*time.Second, 10*time.Millisecond)
	return started
}

func (s *startedServer) url() string { return "https://" + s.addr.String() + "/validate" }

func insecureTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // G402: a test client of a self-signed test server
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

// keptAliveConn is a client's HTTP/1.1 connection, kept open between requests.
type keptAliveConn struct {
	conn *tls.Conn
	r    *bufio.Reader
}

func dialKeptAlive(t *testing.T, s *startedServer) *keptAliveConn {
	t.Helper()
	conn, err := tls.Dial("tcp", s.addr.String(), insecureTLS())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &keptAliveConn{conn: conn, r: bufio.NewReader(conn)}
}

// post sends one request on the connection and reads its final response.
func (k *keptAliveConn) post() (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, "https://webhook/validate", strings.NewReader("{}"))
	if err != nil {
		return nil, err
	}
	if err := req.Write(k.conn); err != nil {
		return nil, err
	}
	return k.finalResponse(req)
}

// finalResponse reads the response to req, skipping interim (1xx) ones as every HTTP/1.1 client
// must (RFC 9110, 15.2): a draining server writes one onto an idle connection.
func (k *keptAliveConn) finalResponse(req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(k.r, req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode < 100 || resp.StatusCode > 199 {
			return resp, nil
		}
	}
}

// rolloutService is a Service during a rollout, as its clients meet it: new connections go to
// the old pod until it is removed from the endpoints, then to the next one; the connections
// made before stay with the old pod.
type rolloutService struct {
	client  *http.Client
	removed atomic.Bool
}

// serviceURL is the Service's address; rolloutService's dialer decides which pod answers.
const serviceURL = "https://webhook-service.test:443/validate"

// newRolloutService keeps up to maxIdle idle connections, each for idleTimeout (the API
// server's client: 90 s).
func newRolloutService(old, next *startedServer, maxIdle int, idleTimeout time.Duration) *rolloutService {
	svc := &rolloutService{}
	dialer := &net.Dialer{}
	svc.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: maxIdle, TLSClientConfig: insecureTLS(), IdleConnTimeout: idleTimeout,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			if svc.removed.Load() {
				return dialer.DialContext(ctx, network, next.addr.String())
			}
			return dialer.DialContext(ctx, network, old.addr.String())
		}}}
	return svc
}

func (s *startedServer) requireStoppedWithin(t *testing.T, d time.Duration, why string) {
	t.Helper()
	select {
	case err := <-s.stopped:
		require.NoError(t, err)
	case <-time.After(d):
		t.Fatalf("expected the server to stop within %s: %s", d, why)
	}
}

func (s *startedServer) requireRunningFor(t *testing.T, d time.Duration, why string) {
	t.Helper()
	select {
	case err := <-s.stopped:
		t.Fatalf("expected the server to keep serving (%s); it stopped: %v", why, err)
	case <-time.After(d):
	}
}

func TestServerDrainsClosingEachConnectionAfterItsResponse(t *testing.T) {
	s := startServer(t, time.Minute)
	// A client that ignores the request to close keeps the server draining.
	ignoring := dialKeptAlive(t, s)
	_, err := ignoring.post()
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}}

	resp, err := postJSON(client, s.url())
	require.NoError(t, err)
	assert.False(t, resp.Close, "expected keep-alive before the server is stopped")

	s.stop()
	require.Eventually(t, s.draining.Load, time.Second, time.Millisecond)
	resp, err = postJSON(client, s.url())
	require.NoError(t, err, "expected the server to keep serving while it drains")
	assert.True(t, resp.Close, "expected `Connection: close` on a response while draining")
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	require.NoError(t, ignoring.conn.Close())
	s.requireStoppedWithin(t, 2*time.Second, "no connection is left")
	_, err = postJSON(client, s.url())
	require.Error(t, err, "expected the server to be stopped after draining")
}

// What P4 found on kind: the API server keeps connections to a stopping pod idle in its pool
// and may pick one at any moment. A connection no request used during the drain must still
// be open and answer when the client finally sends on it; the client closes it, not the server.
func TestServerNeverClosesAnIdleConnectionUnderTheClient(t *testing.T) {
	s := startServer(t, time.Minute)
	idle := dialKeptAlive(t, s)
	resp, err := idle.post()
	require.NoError(t, err)
	require.False(t, resp.Close)

	s.stop()
	s.requireRunningFor(t, 500*time.Millisecond, "a connection is open and idle; only its client may close it")
	resp, err = idle.post()
	require.NoError(t, err, "expected a request written onto a connection kept idle through the drain to be answered")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, resp.Close, "expected `Connection: close` on the answer")
	s.requireStoppedWithin(t, 2*time.Second, "the server closed the last connection after its response")
}

// A draining server asks each idle connection to close (an interim response no request asked
// for); net/http's transport, the API server's, then closes it itself: the drain ends within
// milliseconds, long before its timeout, and no connection was reset under a client.
func TestServerAsksAnIdleConnectionToCloseAndTheAPIServersClientDoes(t *testing.T) {
	s := startServer(t, time.Minute)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS(), IdleConnTimeout: 90 * time.Second}}
	resp, err := postJSON(client, s.url())
	require.NoError(t, err)
	require.False(t, resp.Close, "expected keep-alive before the server is stopped")

	s.stop()
	s.requireStoppedWithin(t, 2*time.Second, "the client closes its idle connection once asked to; the drain timeout is 1 minute")
}

// The API server as it meets a rollout: it keeps several HTTP/1.1 connections to a pod, picks
// the most recently used idle one for each call, so others sit idle, and never resends a POST
// it has written. Here the connections to the stopping pod sit idle through the drain, and a
// burst of calls picks them up just as the drain times out — where a server that resets idle
// connections races the calls written onto them (`connection reset by peer`). No call fails.
func TestServerFailsNoCallOnConnectionsIdleThroughTheDrain(t *testing.T) {
	const stops, callers, drainTimeout = 10, 16, 200 * time.Millisecond
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	for range stops {
		old := startServer(t, drainTimeout)
		svc := newRolloutService(old, startServer(t, time.Minute), callers, 90*time.Second)
		burst := func() {
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					sent.Add(1)
					if _, err := postJSON(svc.client, serviceURL); err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
				})
			}
			wg.Wait()
		}
		burst() // callers connections to the old pod, idle in the pool
		svc.removed.Store(true)
		old.stop()
		time.Sleep(drainTimeout - 20*time.Millisecond)
		for end := time.Now().Add(60 * time.Millisecond); time.Now().Before(end); {
			burst()
		}
		old.requireStoppedWithin(t, 5*time.Second, "the drain timed out")
		svc.client.CloseIdleConnections()
	}
	assert.Zero(t, failed.Load(), "expected no failed call of %d sent across %d stops; first error: %v", sent.Load(), stops, firstErr.Load())
}

func TestServerStopsAtTheDrainTimeout(t *testing.T) {
	s := startServer(t, 300*time.Millisecond)
	idle := dialKeptAlive(t, s)
	_, err := idle.post()
	require.NoError(t, err)

	stopAsked := time.Now()
	s.stop()
	s.requireStoppedWithin(t, 5*time.Second, "the drain timeout passed")
	assert.GreaterOrEqual(t, time.Since(stopAsked), 300*time.Millisecond, "expected the server to wait for the idle connection until the drain timeout")
}

// At the drain timeout an idle connection is reset, not closed: a request the client writes
// onto it afterwards fails to be written (net/http then retries it on a new connection) instead
// of being written and answered with `EOF`, as after a FIN.
func TestServerResetsTheIdleConnectionsLeftAtTheDrainTimeout(t *testing.T) {
	s := startServer(t, 100*time.Millisecond)
	idle := dialKeptAlive(t, s)
	_, err := idle.post()
	require.NoError(t, err)

	s.stop()
	s.requireStoppedWithin(t, 5*time.Second, "the drain timeout passed")
	_, err = idle.post()
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE),
		"expected writing onto the reset connection to fail (ECONNRESET or EPIPE), got %v", err)
}

func TestServerWithoutDrainStopsAtOnce(t *testing.T) {
	s := startServer(t, 0)
	idle := dialKeptAlive(t, s)
	_, err := idle.post()
	require.NoError(t, err)
	s.stop()
	s.requireStoppedWithin(t, time.Second, "--webhook-drain-timeout=0")
}

// Rollouts as a unit: clients keep their HTTP/1.1 connections to a pod alive after it left the
// Service's endpoints (new connections go to another pod) and keep sending on them while the
// pod stops. None of their requests fails.
func TestServerFailsNoRequestOfAConnectionKeptAlive(t *testing.T) {
	old, next := startServer(t, time.Minute), startServer(t, time.Minute)

	svc := newRolloutService(old, next, 8, time.Second)

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
				if _, err := postJSON(svc.client, serviceURL); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // connections to the old pod are open and in use
	svc.removed.Store(true)            // the pod is terminating: the preStop delay runs
	time.Sleep(100 * time.Millisecond)
	old.stop() // SIGTERM
	old.requireStoppedWithin(t, 5*time.Second, "the client's idle connections time out after 1s")
	time.Sleep(100 * time.Millisecond)
	close(stopClients)
	wg.Wait()
	assert.Zero(t, failed.Load(), "expected no failed request of %d sent across the stop; first error: %v", sent.Load(), firstErr.Load())
	assert.Greater(t, sent.Load(), int64(100), "expected the clients to keep sending")
}

// The window P4 still hit on kind (1 admission of 4,666, `read: connection reset by peer`): a
// request the server has begun to take off the socket is no longer waiting in the kernel, yet
// net/http calls the connection idle until it has read the whole header. Neither the drain's
// reset nor the shutdown after it may close such a connection: the request is answered.
func TestServerAnswersARequestItHasBegunToReadWhenTheDrainEnds(t *testing.T) {
	s := startServer(t, 100*time.Millisecond)
	kept := dialKeptAlive(t, s)
	_, err := kept.post()
	require.NoError(t, err)

	var request strings.Builder
	req, err := http.NewRequest(http.MethodPost, "https://webhook/validate", strings.NewReader("{}"))
	require.NoError(t, err)
	require.NoError(t, req.Write(&request))
	head, rest := request.String()[:2], request.String()[2:]
	_, err = kept.conn.Write([]byte(head)) // its own TLS record: the server reads it and waits for more
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // the server's reader takes the record off the socket

	s.stop()
	time.Sleep(300 * time.Millisecond) // past the drain timeout
	_, err = kept.conn.Write([]byte(rest))
	require.NoError(t, err, "expected the rest of the request to be written")
	resp, err := kept.finalResponse(req)
	require.NoError(t, err, "expected the request begun before the drain ended to be answered")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, resp.Close, "expected `Connection: close` on the answer")
	s.requireStoppedWithin(t, 2*time.Second, "the last connection closed after its response")
}

// A connection that never sends a request (a port scan, a client that stalled in its
// handshake) holds the stop no longer than it did before the drain: the server waits for the
// connections in use only, and net/http's Shutdown closes a new connection with no request
// after 5 s, not at the handshake timeout (32 s).
func TestServerStopsDespiteASilentConnection(t *testing.T) {
	s := startServer(t, 100*time.Millisecond)
	silent, err := net.Dial("tcp", s.addr.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = silent.Close() })

	s.stop()
	s.requireStoppedWithin(t, 10*time.Second, "a connection without a request is closed 5 s into the shutdown")
}
