package doctor

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestParseConnect(t *testing.T) {
	for _, c := range ConnectModes() {
		got, err := ParseConnect(string(c))
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
	assert.Equal(t, []Connect{"auto", "port-forward"}, ConnectModes())
	_, err := ParseConnect("direct")
	require.EqualError(t, err, `connect mode "direct": want one of auto, port-forward`)
	_, err = ParseConnect("")
	require.Error(t, err)

	assert.Equal(t, ConnectAuto, Options{}.withDefaults().Connect, "the default is today's behaviour")
	_, err = New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Release: "r", Namespace: "ns", Connect: "sideways"})
	require.EqualError(t, err, `doctor options: connect mode "sideways": want one of auto, port-forward`)
}

// connections records what a Doctor connects to: every TCP dial and every port-forward.
type connections struct {
	mu       sync.Mutex
	dialed   []string
	forwards []string // "pod:port"
}

func (c *connections) dials() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.dialed...)
}

func (c *connections) forwarded() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.forwards...)
}

// fakeForward is what a port-forward's local end leads to in a test.
type fakeForward struct {
	// serve starts what answers at the far end and returns its port on 127.0.0.1.
	serve func(t *testing.T, r *release) int32
	// err fails the port-forward itself (as RBAC or an unreachable kubelet would).
	err error
	// far is what the far end reports when it cannot connect to the Pod's port.
	far error
}

// hangUpServer accepts connections on 127.0.0.1 and closes them at once: the local end of a
// port-forward whose far end could not connect to the Pod.
func hangUpServer(t *testing.T) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close() // hanging up is the point; how the close went is not
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return portOf(t, ln.Addr())
}

// wire makes d record its connections: dials go to loopback only (direct cluster
// addresses are answered with a timeout, as from a machine outside the cluster network), and
// port-forwards lead to f.
func wire(t *testing.T, d *Doctor, r *release, f fakeForward) *connections {
	t.Helper()
	rec := &connections{}
	var forwardAddr string
	if f.serve != nil {
		forwardAddr = net.JoinHostPort("127.0.0.1", itoa(f.serve(t, r)))
	}
	d.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		rec.mu.Lock()
		rec.dialed = append(rec.dialed, addr)
		rec.mu.Unlock()
		if addr != forwardAddr {
			return nil, &net.OpError{Op: "dial", Net: network, Err: os.ErrDeadlineExceeded}
		}
		var dd net.Dialer
		return dd.DialContext(ctx, network, addr)
	}
	d.forward = func(_ context.Context, pod string, port int32) (string, func() error, error) {
		rec.mu.Lock()
		rec.forwards = append(rec.forwards, pod+":"+itoa(port))
		rec.mu.Unlock()
		if f.err != nil {
			return "", nil, f.err
		}
		return forwardAddr, func() error { return f.far }, nil
	}
	return rec
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// TestServingCertificateThroughPortForward: with ConnectPortForward the served-certificate
// check reaches the webhook only through a port-forward to a ready endpoint pod — it never
// dials the ClusterIP or a pod IP — says so in its details, and classifies what it finds as
// ConnectAuto does.
func TestServingCertificateThroughPortForward(t *testing.T) {
	farRefused := refusedError("An error occurred forwarding: error forwarding port 9443 to pod dynamo-operator-6d5f7c9b8-x2x7q, uid : " +
		"failed to connect to localhost:9443 inside namespace \"abc\", IPv4: dial tcp4 127.0.0.1:9443: connect: connection refused")
	cases := []struct {
		name    string
		forward fakeForward
		objects func(t *testing.T, r *release, objs []client.Object) []client.Object
		checks  []string
		secret  func(t *testing.T, r *release) servingPair
		// timeoutSeconds, when set, is every webhook's (default 10).
		timeoutSeconds int32
		// noForward: no port-forward may be attempted.
		noForward      bool
		root, scenario string
		cause          []string
		fix            []string
		details        []string
	}{
		{
			name:    "healthy: verified through the port-forward, and the details say so and why",
			forward: fakeForward{serve: serveSecret},
			details: []string{
				"reaching the webhook through a port-forward to a ready endpoint pod, via the API server: --connect=port-forward: the ClusterIP and Pod IPs are not dialed from this machine",
				"pod dynamo-operator-6d5f7c9b8-x2x7q port 9443 (port-forward): handshake verified against the caBundle",
				"served certificate: subject \"CN=dynamo-webhook-service.dynamo-system.svc\"",
			},
		},
		{
			name:    "T3 served certificate from another CA: unknown authority",
			forward: fakeForward{serve: func(t *testing.T, r *release) int32 { return tlsServer(t, newCA(t, "other").validFor(t, r.host()).tls) }},
			root:    CheckServingCertificate, scenario: "T3",
			cause: []string{"pod dynamo-operator-6d5f7c9b8-x2x7q port 9443 (port-forward) serves a certificate", "does not trust", "x509: certificate signed by unknown authority"},
		},
		{
			name: "T4 served certificate for another name: wrong SAN",
			forward: fakeForward{serve: func(t *testing.T, r *release) int32 {
				return tlsServer(t, r.ca.validFor(t, "wrong.dynamo-system.svc").tls)
			}},
			root: CheckServingCertificate, scenario: "T4",
			cause: []string{"x509: certificate is valid for wrong.dynamo-system.svc, not dynamo-webhook-service.dynamo-system.svc"},
		},
		{
			name: "T5 served certificate expired",
			forward: fakeForward{serve: func(t *testing.T, r *release) int32 {
				return tlsServer(t, r.ca.issue(t, []string{r.host()}, time.Now().Add(-3*time.Hour), time.Now().Add(-time.Hour)).tls)
			}},
			root: CheckServingCertificate, scenario: "T5",
			cause: []string{"x509: certificate has expired or is not yet valid"},
		},
		{
			name:    "T6 nothing listens on the pod's port: the far end's connection refused",
			forward: fakeForward{serve: func(t *testing.T, _ *release) int32 { return hangUpServer(t) }, far: farRefused},
			root:    CheckServingCertificate, scenario: "T6",
			cause:   []string{"through a port-forward (--connect=port-forward): connection refused"},
			details: []string{"pod dynamo-operator-6d5f7c9b8-x2x7q port 9443 (port-forward): An error occurred forwarding", "connect: connection refused"},
		},
		{
			name:           "T9 a server that accepts but does not complete the handshake within the webhooks' timeoutSeconds",
			forward:        fakeForward{serve: func(t *testing.T, _ *release) int32 { return silentServer(t) }},
			timeoutSeconds: 1,
			root:           CheckServingCertificate, scenario: "T9",
			cause: []string{"pod dynamo-operator-6d5f7c9b8-x2x7q port 9443 (port-forward)", "no answer within 1s, the longest timeoutSeconds of"},
		},
		{
			name: "the port-forward itself is forbidden",
			forward: fakeForward{err: errors.New(`port-forwarding to pod dynamo-system/dynamo-operator-6d5f7c9b8-x2x7q: pods "dynamo-operator-6d5f7c9b8-x2x7q" is forbidden: ` +
				`User "dev" cannot create resource "pods/portforward" in API group "" in the namespace "dynamo-system"`)},
			root:  CheckServingCertificate,
			cause: []string{"through a port-forward (--connect=port-forward)", `cannot create resource "pods/portforward"`},
			fix:   []string{"kubectl auth can-i create pods/portforward -n dynamo-system"},
		},
		{
			name: "no ready endpoint names a pod: nothing to port-forward to, and nothing dialed",
			objects: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.service()+"-abcde", func(s *discoveryv1.EndpointSlice) bool {
					s.Endpoints[0].TargetRef = nil
					return true
				})
			},
			noForward: true,
			root:      CheckServingCertificate,
			cause:     []string{"no ready endpoint of Service dynamo-system/dynamo-webhook-service names a pod to port-forward to"},
			fix:       []string{"--connect=auto"},
		},
		{
			name: "T6 no endpoints: the endpoints check is the root, nothing is forwarded",
			objects: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.service()+"-abcde", func(s *discoveryv1.EndpointSlice) bool {
					s.Endpoints = nil
					return true
				})
			},
			noForward: true,
			root:      CheckEndpoints, scenario: "T6",
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
				tc.forward.serve = serveSecret
			}
			objs := r.objects(t)
			if tc.objects != nil {
				objs = tc.objects(t, r, objs)
			}
			checks := tc.checks
			if checks == nil {
				checks = handshakeChecks
			}
			d := fakeDoctor(t, r, objs, time.Now())
			d.opts.DialTimeout = time.Second
			d.opts.Connect = ConnectPortForward
			rec := wire(t, d, r, tc.forward)

			report := runChecks(context.Background(), d, checksByID(t, checks...))

			// Never a cluster address: only the port-forward's local end.
			for _, addr := range rec.dials() {
				host, _, err := net.SplitHostPort(addr)
				require.NoError(t, err)
				assert.NotEqual(t, r.podIP, host, "dialed the pod IP")
				assert.NotEqual(t, net.JoinHostPort(r.clusterIP, itoa(r.servicePort)), addr, "dialed the ClusterIP")
			}
			if tc.noForward {
				assert.Empty(t, rec.forwarded(), "port-forwards")
				assert.Empty(t, rec.dials(), "dials")
			} else {
				assert.Equal(t, []string{r.podName() + ":9443"}, rec.forwarded(), "port-forwards")
			}

			res, details := requireResult(t, report, CheckServingCertificate, tc.details)
			if tc.root == "" {
				require.Equal(t, StatusPass, res.Status, "cause: %s\ndetails:\n%s", res.Cause, details)
				return
			}
			requireOneRoot(t, report, tc.root, tc.scenario, tc.cause, tc.fix)
			switch {
			case tc.root == CheckEndpoints:
				assert.Equal(t, StatusSkipped, res.Status)
			case tc.root != CheckServingCertificate:
				assert.Equal(t, StatusConsequence, res.Status)
				assert.Equal(t, []string{tc.root}, res.DependsOn)
				assert.Contains(t, details, "--connect=port-forward")
			default:
				assert.Contains(t, details, "--connect=port-forward", "the details say why it port-forwarded")
			}
		})
	}
}

// TestServingCertificateAutoFallsBackToPortForward: with ConnectAuto, when neither the ClusterIP
// nor the endpoints accept a connection (and not all refuse it), the check port-forwards, and
// its details say why; a refusal at the far end is T6, as a refused dial is.
func TestServingCertificateAutoFallsBackToPortForward(t *testing.T) {
	run := func(t *testing.T, f fakeForward) (Result, *connections) {
		r := newRelease(t)
		d := fakeDoctor(t, r, r.objects(t), time.Now())
		d.opts.DialTimeout = time.Second
		rec := wire(t, d, r, f)
		report := runChecks(context.Background(), d, checksByID(t, CheckConfigurations, CheckCABundle, CheckService, CheckEndpoints, CheckServingCertificate))
		res, ok := report.Find(CheckServingCertificate)
		require.True(t, ok)
		assert.Equal(t, []string{"127.0.0.1:443", "10.244.0.5:9443"}, rec.dials()[:2], "ClusterIP, then the endpoint, first")
		return res, rec
	}
	t.Run("healthy", func(t *testing.T) {
		res, rec := run(t, fakeForward{serve: serveSecret})
		details := strings.Join(res.Details, "\n")
		require.Equal(t, StatusPass, res.Status, "cause: %s\ndetails:\n%s", res.Cause, details)
		assert.Len(t, rec.forwarded(), 1)
		assert.Contains(t, details, "127.0.0.1:443 (ClusterIP of Service dynamo-system/dynamo-webhook-service): dial tcp")
		assert.Contains(t, details, "through a port-forward to a ready endpoint pod, via the API server: no address of the Service accepted a connection from here")
		assert.Contains(t, details, "pod dynamo-operator-6d5f7c9b8-x2x7q port 9443 (port-forward): handshake verified")
	})
	t.Run("T6 refused at the far end", func(t *testing.T) {
		res, _ := run(t, fakeForward{serve: func(t *testing.T, _ *release) int32 { return hangUpServer(t) },
			far: refusedError("An error occurred forwarding: dial tcp4 127.0.0.1:9443: connect: connection refused")})
		assert.Equal(t, StatusFail, res.Status)
		assert.Equal(t, "T6", res.Scenario)
		assert.Contains(t, res.Cause, "connection refused (nothing listens on the Service's port)")
	})
}

func TestRefusedErrorIsECONNREFUSED(t *testing.T) {
	err := refusedError("dial tcp4 127.0.0.1:9443: connect: connection refused")
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.True(t, isRefused(err))

	var f forwardErrors
	require.NoError(t, f.first())
	f.Error(errors.New("error forwarding port 9443 to pod p: i/o timeout"), "An error occurred forwarding")
	assert.False(t, isRefused(f.first()))
	require.EqualError(t, f.first(), "An error occurred forwarding: error forwarding port 9443 to pod p: i/o timeout")
	f.Error(errors.New("failed to connect to localhost:9443 inside namespace x: dial tcp4 127.0.0.1:9443: connect: connection refused"), "An error occurred forwarding")
	assert.True(t, isRefused(f.first()), "a refusal among the far end's errors decides")
}
