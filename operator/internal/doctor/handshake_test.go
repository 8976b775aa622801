package doctor

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// tlsServer serves cert on 127.0.0.1 and returns its port.
func tlsServer(t *testing.T, cert tls.Certificate) int32 {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return portOf(t, srv.Listener.Addr())
}

// serveSecret serves the release's serving certificate (the Secret's) on 127.0.0.1 and
// returns its port.
func serveSecret(t *testing.T, r *release) int32 { return tlsServer(t, r.serving.tls) }

// slowTLSServer serves cert on 127.0.0.1, each connection's handshake answered only after
// delay, and returns its port.
func slowTLSServer(t *testing.T, cert tls.Certificate, delay time.Duration) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				time.Sleep(delay)
				_ = tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}).Handshake()
			}()
		}
	}()
	return portOf(t, ln.Addr())
}

// silentServer accepts connections on 127.0.0.1 and never answers.
func silentServer(t *testing.T) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close() // the test is over; the server only had to stay silent
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				<-done
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); close(done) })
	return portOf(t, ln.Addr())
}

// closedPort is a port on 127.0.0.1 nothing listens on.
func closedPort(t *testing.T) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := portOf(t, ln.Addr())
	require.NoError(t, ln.Close())
	return port
}

func portOf(t *testing.T, addr net.Addr) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr.String())
	require.NoError(t, err)
	n, err := strconv.ParseInt(p, 10, 32)
	require.NoError(t, err)
	return int32(n)
}

// pointEndpointAt makes the EndpointSlice's one endpoint 127.0.0.1:port.
func pointEndpointAt(t *testing.T, r *release, objs []client.Object, port int32) []client.Object {
	return edit(t, objs, r.service()+"-abcde", func(s *discoveryv1.EndpointSlice) bool {
		s.Endpoints[0].Addresses = []string{"127.0.0.1"}
		s.Ports[0].Port = ptr.To(port)
		return true
	})
}

// handshakeChecks are the checks the served-certificate check depends on, and it.
var handshakeChecks = []string{CheckConfigurations, CheckCABundle, CheckService, CheckEndpoints, CheckServingCertificate}

func TestServingCertificate(t *testing.T) {
	// Without the Secret check, a bad served certificate is the root cause here; with it, the
	// Secret check names the cause first (last case).
	cases := []struct {
		name string
		// serve starts what answers on the ClusterIP and returns its port; the endpoint is
		// 127.0.0.1:<closed port> unless endpoint returns a port.
		serve    func(t *testing.T, r *release) int32
		endpoint func(t *testing.T, r *release) int32
		checks   []string
		secret   func(t *testing.T, r *release) servingPair
		// timeoutSeconds, when set, is every webhook's (default 10).
		timeoutSeconds int32
		// root/scenario: the expected root cause (empty root: healthy).
		root, scenario string
		cause          []string
		details        []string
	}{
		{
			name:    "healthy: the served certificate verifies against the caBundle for <svc>.<ns>.svc",
			serve:   serveSecret,
			details: []string{"handshake verified against the caBundle", "served certificate: subject \"CN=dynamo-webhook-service.dynamo-system.svc\""},
		},
		{
			name:  "T3 served certificate from another CA: unknown authority",
			serve: func(t *testing.T, r *release) int32 { return tlsServer(t, newCA(t, "other").validFor(t, r.host()).tls) },
			root:  CheckServingCertificate, scenario: "T3",
			cause: []string{"does not trust", "x509: certificate signed by unknown authority"},
		},
		{
			name: "T4 served certificate for another name: wrong SAN",
			serve: func(t *testing.T, r *release) int32 {
				return tlsServer(t, r.ca.validFor(t, "wrong.dynamo-system.svc").tls)
			},
			root: CheckServingCertificate, scenario: "T4",
			cause: []string{"x509: certificate is valid for wrong.dynamo-system.svc, not dynamo-webhook-service.dynamo-system.svc"},
		},
		{
			name: "T5 served certificate expired",
			serve: func(t *testing.T, r *release) int32 {
				return tlsServer(t, r.ca.issue(t, []string{r.host()}, time.Now().Add(-3*time.Hour), time.Now().Add(-time.Hour)).tls)
			},
			root: CheckServingCertificate, scenario: "T5",
			cause: []string{"x509: certificate has expired or is not yet valid"},
		},
		{
			name:  "T6 nothing listens behind the ClusterIP or the endpoint: connection refused",
			serve: func(t *testing.T, _ *release) int32 { return closedPort(t) },
			root:  CheckServingCertificate, scenario: "T6",
			cause:   []string{"connection refused"},
			details: []string{"connect: connection refused"},
		},
		{
			name:           "T9 a server that accepts but does not complete the handshake within the webhooks' timeoutSeconds: slower than timeoutSeconds",
			serve:          func(t *testing.T, _ *release) int32 { return silentServer(t) },
			timeoutSeconds: 1,
			root:           CheckServingCertificate, scenario: "T9",
			cause: []string{"TLS handshake with 127.0.0.1:", "no answer within 1s, the longest timeoutSeconds of all 6 webhooks",
				"every call the API server makes to them times out (context deadline exceeded)"},
		},
		{
			name:    "a handshake slower than the dial timeout but within the webhooks' timeoutSeconds: waited for, as the API server does",
			serve:   func(t *testing.T, r *release) int32 { return slowTLSServer(t, r.serving.tls, 1500*time.Millisecond) },
			details: []string{"handshake verified against the caBundle"},
		},
		{
			name:     "ClusterIP refused, endpoint answers: the endpoint decides",
			serve:    func(t *testing.T, _ *release) int32 { return closedPort(t) },
			endpoint: serveSecret,
			details:  []string{"connect: connection refused", "(endpoint (pod dynamo-operator-6d5f7c9b8-x2x7q)): handshake verified"},
		},
		{
			name:    "served certificate differs from the Secret's (not reloaded yet)",
			serve:   func(t *testing.T, r *release) int32 { return tlsServer(t, r.ca.validFor(t, r.host()).tls) },
			checks:  append([]string{CheckSecret}, handshakeChecks...),
			details: []string{"the served certificate differs from tls.crt of Secret dynamo-system/webhook-server-cert"},
		},
		{
			name:    "served certificate is the Secret's",
			serve:   serveSecret,
			checks:  append([]string{CheckSecret}, handshakeChecks...),
			details: []string{"the served certificate is the Secret's tls.crt"},
		},
		{
			name: "T4 in the Secret and served: the Secret check is the root, the handshake its consequence",
			secret: func(t *testing.T, r *release) servingPair {
				return r.ca.validFor(t, "wrong.dynamo-system.svc")
			},
			checks: append([]string{CheckSecret}, handshakeChecks...),
			root:   CheckSecret, scenario: "T4",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRelease(t)
			if tc.timeoutSeconds != 0 {
				r.timeoutSeconds = tc.timeoutSeconds
			}
			if tc.secret != nil {
				r.serving = tc.secret(t, r)
				tc.serve = serveSecret
			}
			r.servicePort = tc.serve(t, r)
			objs := r.objects(t)
			ep := closedPort(t)
			if tc.endpoint != nil {
				ep = tc.endpoint(t, r)
			}
			objs = pointEndpointAt(t, r, objs, ep)
			checks := tc.checks
			if checks == nil {
				checks = handshakeChecks
			}
			d := fakeDoctor(t, r, objs, time.Now())
			d.opts.DialTimeout = time.Second
			report := runChecks(context.Background(), d, checksByID(t, checks...))
			res, details := requireResult(t, report, CheckServingCertificate, tc.details)
			if tc.root == "" {
				require.Equal(t, StatusPass, res.Status, "cause: %s\ndetails:\n%s", res.Cause, details)
				return
			}
			requireOneRoot(t, report, tc.root, tc.scenario, tc.cause, nil)
			if tc.root != CheckServingCertificate {
				assert.Equal(t, StatusConsequence, res.Status)
				assert.Equal(t, []string{tc.root}, res.DependsOn)
			}
		})
	}
}

func TestServingCertificateSkippedWithoutInputs(t *testing.T) {
	r := newRelease(t)
	objs := edit(t, r.objects(t), r.service(), drop[*corev1.Service])
	report := runChecks(context.Background(), fakeDoctor(t, r, objs, time.Now()),
		checksByID(t, CheckConfigurations, CheckCABundle, CheckService, CheckEndpoints, CheckServingCertificate))
	res, _ := report.Find(CheckServingCertificate)
	assert.Equal(t, StatusSkipped, res.Status)
	assert.Equal(t, "skipped: depends on webhook-service, service-endpoints", res.Cause)
	assert.Equal(t, []string{CheckService}, res.DependsOn)
}
