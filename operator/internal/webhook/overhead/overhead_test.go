package overhead

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gauntlet-dev/gauntlet/operator/internal/logging"
	"github.com/gauntlet-dev/gauntlet/operator/internal/scheme"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook"
)

const (
	mutatePath   = "/mutate-nvidia-com-v1alpha1-dynamographdeployment"
	validatePath = "/validate-nvidia-com-v1alpha1-dynamographdeployment"
)

// TestMain installs the operator's logger as main does (production JSON lines, info level),
// writing to a pipe that a goroutine drains, as a container runtime drains the operator's
// stderr: every log line costs what it costs in a pod, a write(2) included.
func TestMain(m *testing.M) {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	logging.Install(logging.New(zap.Options{}, w))
	os.Exit(m.Run())
}

// BenchmarkAdmissionOverTLS is one admission call, or the two calls of a create (mutate, then
// validate), over one kept-alive HTTP/1.1 TLS connection, to the operator's webhook server and
// to the floor. The client reads each answer whole and decodes nothing (but the first, to check
// that the object is admitted).
func BenchmarkAdmissionOverTLS(b *testing.B) {
	cert, pool := servingCert(b)
	operator := startOperator(b, cert)
	floor := startFloor(b, cert)
	floorOnOperatorServer := startFloorOnOperatorServer(b, cert)
	for _, tc := range []struct {
		name  string
		addr  string
		calls []call
	}{
		{"floor/create", floor, []call{{mutatePath, mutateReview}, {validatePath, validateReview}}},
		{"floor-on-operator-server/create", floorOnOperatorServer, []call{{mutatePath, mutateReview}, {validatePath, validateReview}}},
		{"operator/create", operator, []call{{mutatePath, mutateReview}, {validatePath, validateReview}}},
		{"operator/mutate", operator, []call{{mutatePath, mutateReview}}},
		{"operator/validate", operator, []call{{validatePath, validateReview}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := newClient(pool)
			defer c.CloseIdleConnections()
			for _, cl := range tc.calls { // warm: connection and handshake
				allowed(b, cl, c.post(b, tc.addr, cl))
			}
			b.ReportAllocs()
			cpu := startCPU(b)
			for b.Loop() {
				for _, cl := range tc.calls {
					c.post(b, tc.addr, cl)
				}
			}
			cpu.report()
		})
	}
}

// BenchmarkAdmissionHandler is BenchmarkAdmissionOverTLS without the transport: the server's
// handler called in process with a recorded response, so what differs is the handlers' work
// alone.
func BenchmarkAdmissionHandler(b *testing.B) {
	cert, _ := servingCert(b)
	operator := operatorServer(b, cert)
	for _, tc := range []struct {
		name    string
		handler http.Handler
		calls   []call
	}{
		{"floor/create", http.HandlerFunc(floorAdmit), []call{{mutatePath, mutateReview}, {validatePath, validateReview}}},
		{"operator/create", operator.handler(), []call{{mutatePath, mutateReview}, {validatePath, validateReview}}},
		{"operator/mutate", operator.handler(), []call{{mutatePath, mutateReview}}},
		{"operator/validate", operator.handler(), []call{{validatePath, validateReview}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for _, cl := range tc.calls {
				allowed(b, cl, serveOnce(b, tc.handler, cl))
			}
			b.ReportAllocs()
			cpu := startCPU(b)
			for b.Loop() {
				for _, cl := range tc.calls {
					serveOnce(b, tc.handler, cl)
				}
			}
			cpu.report()
		})
	}
}

// call is one admission request: a path and a review body.
type call struct {
	path string
	body func() []byte
}

// allowed fails the benchmark unless answer admits the object: the benchmarks measure the
// path of an admitted create, not a denial's.
func allowed(b *testing.B, c call, answer []byte) {
	var review struct {
		Response *struct {
			Allowed bool `json:"allowed"`
		} `json:"response"`
	}
	if err := json.Unmarshal(answer, &review); err != nil || review.Response == nil || !review.Response.Allowed {
		b.Fatalf("POST %s: not admitted (%v): %s", c.path, err, answer)
	}
}

func serveOnce(b *testing.B, h http.Handler, c call) []byte {
	req := httptest.NewRequest(http.MethodPost, c.path, bytes.NewReader(c.body()))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("POST %s: HTTP %d: %s", c.path, rec.Code, rec.Body.String())
	}
	return rec.Body.Bytes()
}

// client posts reviews as the API server's webhook client does: HTTP/1.1 over TLS, one
// kept-alive connection, JSON in and out.
type client struct{ *http.Client }

func newClient(pool *x509.CertPool) client {
	return client{&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 1,
	}}}
}

func (c client) post(b *testing.B, addr string, cl call) []byte {
	req, err := http.NewRequest(http.MethodPost, "https://"+addr+cl.path, bytes.NewReader(cl.body()))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatalf("POST %s: %v", cl.path, err)
	}
	answer, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(answer) == 0 {
		b.Fatalf("POST %s: HTTP %d, %d bytes, %v", cl.path, resp.StatusCode, len(answer), err)
	}
	return answer
}

// operatorUnderTest is the operator's webhook server as main composes it.
type operatorUnderTest struct {
	srv  *webhook.Server
	addr string
}

func (o operatorUnderTest) handler() http.Handler { return o.srv.WebhookMux() }

// operatorServer builds the webhook server main builds (serverTLS, webhook.NewServer, every
// webhook registered by webhook.Register with a cluster-wide operator's lease exclusions) on
// a manager that never starts.
func operatorServer(b *testing.B, cert *tls.Certificate) operatorUnderTest {
	b.Helper()
	o := newWebhookServer(b, cert)
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          o.srv,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := webhook.Register(mgr, webhook.Config{Exclusions: noExclusions{}, OperatorVersion: "v0.9.0-bench"}); err != nil {
		b.Fatal(err)
	}
	return o
}

// newWebhookServer is webhook.NewServer as main configures it (serverTLS), serving cert on a
// free loopback port, with nothing registered yet.
func newWebhookServer(b *testing.B, cert *tls.Certificate) operatorUnderTest {
	b.Helper()
	port := freePort(b)
	srv := webhook.NewServer(ctrlwebhook.Options{
		Host: "127.0.0.1", Port: port,
		TLSOpts: []func(*tls.Config){serverTLS, func(c *tls.Config) {
			c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil }
		}},
	}, webhook.DefaultDrainTimeout, ctrl.Log.WithName("webhook-server"))
	return operatorUnderTest{srv: srv, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
}

// startOperator serves operatorServer until the benchmark ends and returns its address.
func startOperator(b *testing.B, cert *tls.Certificate) string {
	b.Helper()
	return serve(b, operatorServer(b, cert))
}

// startFloorOnOperatorServer serves the floor's handler on both admission paths of the
// operator's server (webhook.Server and controller-runtime's metrics around each path, none of
// the operator's decorators), to tell the server's cost from the handlers'.
func startFloorOnOperatorServer(b *testing.B, cert *tls.Certificate) string {
	b.Helper()
	o := newWebhookServer(b, cert)
	o.srv.Register(mutatePath, http.HandlerFunc(floorAdmit))
	o.srv.Register(validatePath, http.HandlerFunc(floorAdmit))
	return serve(b, o)
}

// serve runs o's server until the benchmark ends and returns its address once it serves.
func serve(b *testing.B, o operatorUnderTest) string {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- o.srv.Start(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			b.Errorf("webhook server: %v", err)
		}
	})
	ready := o.srv.StartedChecker()
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := ready(nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("operator webhook server not serving: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return o.addr
}

// noExclusions is a cluster-wide operator's lease view with no namespace-restricted operator
// around.
type noExclusions struct{}

func (noExclusions) Excluded(string) bool { return false }

// serverTLS is main's TLS policy of the webhook server.
func serverTLS(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
	c.MinVersion = tls.VersionTLS12
}

func freePort(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// servingCert is a self-signed ECDSA certificate for 127.0.0.1 (what the operator's automatic
// mode generates is ECDSA P-256 too) and a pool that trusts it.
func servingCert(b *testing.B) (*tls.Certificate, *x509.CertPool) {
	b.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		b.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
