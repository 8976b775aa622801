package doctor

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gauntlet-dev/gauntlet/operator/internal/scheme"
	"github.com/gauntlet-dev/gauntlet/operator/internal/testcluster"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook"
)

// The webhook Service of the end-to-end test: a ClusterIP in serviceCIDR and a port the test
// may bind without privileges (the chart's Service listens on 443).
const (
	e2eClusterIP   = "127.0.101.10"
	e2eServicePort = 19444
	// slowLatency is the slow backend's injected latency (--webhook-latency-injection),
	// above the 1s timeoutSeconds the T9 case sets.
	slowLatency = 3 * time.Second
)

var (
	// operatorLogs is what the in-process operator webhooks log; the test kubelet serves it
	// as the operator Pod's log.
	operatorLogs  = &testcluster.LogBuffer{}
	setLoggerOnce sync.Once
)

// forwarder plays kube-proxy for the webhook Service: it listens on ClusterIP:port and
// passes connections to the current backend. Stopping it leaves nothing listening there
// (connection refused, as with no ready endpoints).
type forwarder struct {
	addr    string
	mu      sync.Mutex
	ln      net.Listener
	backend string
	conns   map[net.Conn]struct{}
}

func (f *forwarder) start(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", f.addr)
	require.NoError(t, err, "listening on the webhook Service's ClusterIP %s", f.addr)
	f.ln = ln
	go f.serve(ln)
}

func (f *forwarder) serve(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		backend := f.backend
		f.mu.Unlock()
		up, err := net.Dial("tcp", backend)
		if err != nil {
			_ = conn.Close() // no backend: hang up, as a Service without endpoints does
			continue
		}
		f.track(conn, up)
		go func() {
			defer f.untrack(conn, up)
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
			go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
			<-done
		}()
	}
}

func (f *forwarder) track(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
}

func (f *forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		_ = c.Close() // the copy is over either way
		delete(f.conns, c)
	}
}

// dropConnections closes every open connection, so the API server's next call does a new
// TLS handshake (it keeps connections alive across calls).
func (f *forwarder) dropConnections() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		_ = c.Close() // dropping them is the point; a failed close drops them too
		delete(f.conns, c)
	}
}

func (f *forwarder) setBackend(addr string) {
	f.mu.Lock()
	f.backend = addr
	f.mu.Unlock()
	f.dropConnections()
}

func (f *forwarder) current() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.backend
}

func (f *forwarder) stop() {
	f.mu.Lock()
	if f.ln != nil {
		_ = f.ln.Close() // Accept in serve returns either way
		f.ln = nil
	}
	f.mu.Unlock()
	f.dropConnections()
}

// world is a release installed on the test API server with the operator's real webhook
// server behind its Service: every check of the doctor has something real to look at.
type world struct {
	r          *release
	fwd        *forwarder
	fast, slow string
	cert       atomic.Pointer[tls.Certificate]
	logs       *testcluster.LogBuffer
	doctor     *Doctor
	dialed     *dialRecorder
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// startWebhookServer runs the operator's webhooks (webhook.Register on controller-runtime's
// webhook server) on 127.0.0.1, serving whatever certificate w.cert holds, and returns
// its address.
func (w *world) startWebhookServer(ctx context.Context, t testing.TB, cfg webhook.Config) string {
	t.Helper()
	port := freePort(t)
	srv := ctrlwebhook.NewServer(ctrlwebhook.Options{
		Host: "127.0.0.1", Port: port,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.NextProtos = []string{"http/1.1"}
			c.MinVersion = tls.VersionTLS12
			c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return w.cert.Load(), nil }
		}},
	})
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", WebhookServer: srv,
	})
	require.NoError(t, err)
	require.NoError(t, webhook.Register(mgr, cfg))
	go func() {
		if err := srv.Start(ctx); err != nil {
			t.Errorf("webhook server on port %d: %v", port, err)
		}
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close() // only whether it connects matters
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "webhook server on %s did not start", addr)
	return addr
}

func newWorld(t *testing.T) *world {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// controller-runtime's global logger (which the webhook server logs "Starting webhook
	// server" through) can be set only once per process.
	setLoggerOnce.Do(func() { ctrl.SetLogger(zap.New(zap.WriteTo(operatorLogs))) })
	w := &world{logs: operatorLogs}
	w.r = newRelease(t)
	w.r.clusterIP, w.r.servicePort = e2eClusterIP, e2eServicePort
	w.cert.Store(&w.r.serving.tls)
	w.fast = w.startWebhookServer(ctx, t, webhook.Config{OperatorVersion: "v0.0.0-doctor-test"})
	w.slow = w.startWebhookServer(ctx, t, webhook.Config{OperatorVersion: "v0.0.0-doctor-test", LatencyInjection: slowLatency})
	w.fwd = &forwarder{addr: net.JoinHostPort(e2eClusterIP, strconv.Itoa(e2eServicePort)), backend: w.fast, conns: map[net.Conn]struct{}{}}
	t.Cleanup(w.fwd.stop)
	kubelet.serve(w.r.namespace, w.r.podName(), "operator", w.logs.String)
	// A port-forward to the operator Pod's webhook port reaches the backend the Service
	// forwards to.
	kubelet.forwardTo(w.r.namespace, w.r.podName(), w.r.podPort, w.fwd.current)
	w.useDoctor(t, ConnectAuto)
	return w
}

// useDoctor makes w.doctor a Doctor that reaches the webhook as connect says and records the
// addresses it dials in w.dialed.
func (w *world) useDoctor(t *testing.T, connect Connect) {
	t.Helper()
	d, err := New(env.Config, Options{Release: w.r.name, Namespace: w.r.namespace, TestNamespace: w.r.testNamespace, DialTimeout: 2 * time.Second, Connect: connect})
	require.NoError(t, err)
	w.dialed = &dialRecorder{}
	d.dial = w.dialed.dial
	w.doctor = d
}

// dialRecorder dials and remembers the addresses.
type dialRecorder struct {
	mu    sync.Mutex
	addrs []string
}

func (r *dialRecorder) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	r.mu.Lock()
	r.addrs = append(r.addrs, addr)
	r.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// take returns the addresses dialed since the last take.
func (r *dialRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.addrs
	r.addrs = nil
	return out
}

// expectNoClusterAddressDialed checks that since the last take, the doctor dialed only
// loopback addresses that are neither the Service's ClusterIP nor the Pod IP: port-forwards'
// local ends.
func (w *world) expectNoClusterAddressDialed(t *testing.T) {
	t.Helper()
	for _, addr := range w.dialed.take() {
		host, _, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1", host, "the doctor dialed %s with --connect=port-forward", addr)
		assert.NotEqual(t, w.r.clusterIP, host)
		assert.NotEqual(t, w.r.podIP, host)
	}
}

// reset installs the healthy release again and waits until the doctor agrees.
func (w *world) reset(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	w.cert.Store(&w.r.serving.tls)
	w.fwd.setBackend(w.fast)
	w.fwd.start(t)
	for _, o := range append(w.r.objects(t), w.r.rbacObjects()...) {
		apply(ctx, t, env.Client, o)
	}
	w.fwd.dropConnections()
	report := w.runUntil(func(r Report) bool { return r.Healthy() })
	require.True(t, report.Healthy(), "the healthy release does not pass the doctor:\n%s", text(report))
}

// runUntil runs the doctor until done accepts the report, for at most 30s, and returns the
// last report. The API server picks up configuration and Service changes through informers,
// so a change shows in the dry-run a moment after it was made.
func (w *world) runUntil(done func(Report) bool) Report {
	deadline := time.Now().Add(30 * time.Second)
	for {
		report := w.doctor.Run(context.Background())
		if done(report) || time.Now().After(deadline) {
			return report
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func text(r Report) string {
	var b strings.Builder
	_ = r.WriteText(&b)
	return b.String()
}

// editWebhooks applies fn to every webhook of both configurations in the cluster.
func (w *world) editWebhooks(t *testing.T, fn func(webhookFields)) {
	t.Helper()
	ctx := context.Background()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: w.r.validating()}, vwc))
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: w.r.mutating()}, mwc))
	forEachWebhook(fn, vwc, mwc)
	require.NoError(t, env.Client.Update(ctx, vwc))
	require.NoError(t, env.Client.Update(ctx, mwc))
}

func (w *world) update(t *testing.T, obj client.Object, fn func()) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	fn()
	require.NoError(t, env.Client.Update(ctx, obj))
}

func (w *world) delete(t *testing.T, obj client.Object) {
	t.Helper()
	require.NoError(t, env.Client.Delete(context.Background(), obj, client.GracePeriodSeconds(0)))
}

// serveCertificate makes the operator serve pair from its Secret, as external mode does
// after the kubelet updated the mounted Secret.
func (w *world) serveCertificate(t *testing.T, pair servingPair) {
	t.Helper()
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: w.r.namespace, Name: w.r.deployment()}}
	w.update(t, deploy, func() { setMode("external")(deploy) })
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.r.namespace, Name: "webhook-server-cert"}}
	w.update(t, secret, func() {
		secret.Data["tls.crt"], secret.Data["tls.key"] = pair.certPEM, pair.keyPEM
	})
	w.cert.Store(&pair.tls)
	w.fwd.dropConnections()
}

// scaleToZero is the operator scaled to 0: no Pod, no ready endpoint, nothing listening.
func (w *world) scaleToZero(t *testing.T) {
	t.Helper()
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: w.r.namespace, Name: w.r.deployment()}}
	w.update(t, deploy, func() { deploy.Spec.Replicas = ptr.To[int32](0) })
	deploy.Status = appsv1.DeploymentStatus{}
	require.NoError(t, env.Client.Status().Update(context.Background(), deploy))
	w.delete(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.r.namespace, Name: w.r.podName()}})
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: w.r.namespace, Name: w.r.service() + "-abcde"}}
	w.update(t, slice, func() { slice.Endpoints = nil })
	w.fwd.stop()
}

// TestDoctorAgainstAPIServer injects each troubleshooting fault into a release served by the
// operator's real webhooks and checks that the doctor names exactly that fault as the one
// root cause, that the checks it breaks downstream are marked as its consequences, and that
// the dry-run's failed-call classification (the API server's own error text) agrees.
func TestDoctorAgainstAPIServer(t *testing.T) {
	w := newWorld(t)
	type expect struct {
		status   Status
		scenario string
	}
	cases := []struct {
		name           string
		inject         func(t *testing.T, w *world)
		root, scenario string
		// others pins other checks' status and (for consequences) scenario.
		others map[string]expect
	}{
		{
			name: "T1 ValidatingWebhookConfiguration deleted",
			inject: func(t *testing.T, w *world) {
				w.delete(t, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: w.r.validating()}})
			},
			root: CheckConfigurations, scenario: "T1",
			others: map[string]expect{CheckDryRun: {StatusConsequence, "T1"}},
		},
		{
			name: "T2 namespaceSelector does not match the namespace",
			inject: func(t *testing.T, w *world) {
				w.editWebhooks(t, func(h webhookFields) {
					*h.namespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"dynamo.nvidia.com/webhooks": "enabled"}}
				})
			},
			root: CheckNamespaceSelector, scenario: "T2",
			others: map[string]expect{CheckDryRun: {StatusConsequence, "T2"}},
		},
		{
			name: "T3 caBundle empty",
			inject: func(t *testing.T, w *world) {
				w.editWebhooks(t, func(h webhookFields) {
					h.clientConfig.CABundle = nil
				})
			},
			root: CheckCABundle, scenario: "T3",
			others: map[string]expect{CheckServingCertificate: {StatusSkipped, ""}, CheckDryRun: {StatusConsequence, "T3"}},
		},
		{
			name: "T3 caBundle from another CA",
			inject: func(t *testing.T, w *world) {
				other := newCA(t, "another-ca")
				w.editWebhooks(t, func(h webhookFields) {
					h.clientConfig.CABundle = other.pem
				})
			},
			root: CheckCABundle, scenario: "T3",
			others: map[string]expect{CheckServingCertificate: {StatusConsequence, "T3"}, CheckDryRun: {StatusConsequence, "T3"}},
		},
		{
			name:   "T4 serving cert SAN lacks <svc>.<ns>.svc (external mode)",
			inject: func(t *testing.T, w *world) { w.serveCertificate(t, w.r.ca.validFor(t, "wrong.dynamo-system.svc")) },
			root:   CheckSecret, scenario: "T4",
			others: map[string]expect{CheckRBAC: {StatusPass, ""}, CheckServingCertificate: {StatusConsequence, "T4"}, CheckDryRun: {StatusConsequence, "T4"}},
		},
		{
			name: "T5 serving cert expired (external mode)",
			inject: func(t *testing.T, w *world) {
				w.serveCertificate(t, w.r.ca.issue(t, []string{w.r.host()}, time.Now().Add(-3*time.Hour), time.Now().Add(-time.Hour)))
			},
			root: CheckSecret, scenario: "T5",
			others: map[string]expect{CheckServingCertificate: {StatusConsequence, "T5"}, CheckDryRun: {StatusConsequence, "T5"}},
		},
		{
			name:   "T6 operator scaled to 0, failurePolicy Fail",
			inject: func(t *testing.T, w *world) { w.scaleToZero(t) },
			root:   CheckEndpoints, scenario: "T6",
			others: map[string]expect{CheckServingCertificate: {StatusSkipped, ""}, CheckLogs: {StatusConsequence, ""}, CheckDryRun: {StatusConsequence, "T6"}},
		},
		{
			name: "T7 operator scaled to 0, failurePolicy Ignore",
			inject: func(t *testing.T, w *world) {
				w.editWebhooks(t, func(h webhookFields) {
					*h.failurePolicy = ptr.To(admissionregistrationv1.Ignore)
				})
				w.scaleToZero(t)
			},
			root: CheckEndpoints, scenario: "T7",
			others: map[string]expect{CheckDryRun: {StatusConsequence, "T7"}},
		},
		{
			name: "T8 webhook Service deleted",
			inject: func(t *testing.T, w *world) {
				w.delete(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.r.namespace, Name: w.r.service()}})
			},
			root: CheckService, scenario: "T8",
			others: map[string]expect{CheckEndpoints: {StatusSkipped, ""}, CheckServingCertificate: {StatusSkipped, ""}, CheckDryRun: {StatusConsequence, "T8"}},
		},
		{
			name: "T9 webhook slower than timeoutSeconds (--webhook-latency-injection)",
			inject: func(t *testing.T, w *world) {
				w.editWebhooks(t, func(h webhookFields) {
					*h.timeoutSeconds = ptr.To[int32](1)
				})
				w.fwd.setBackend(w.slow)
			},
			root: CheckDryRun, scenario: "T9",
			others: map[string]expect{CheckServingCertificate: {StatusPass, ""}},
		},
		{
			name: "T10 cert-controller RBAC missing",
			inject: func(t *testing.T, w *world) {
				w.delete(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: w.r.namespace, Name: w.r.deployment() + "-certs"}})
			},
			root: CheckRBAC, scenario: "T10",
		},
		{
			name: "T11 Secret deleted while running",
			inject: func(t *testing.T, w *world) {
				w.delete(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.r.namespace, Name: "webhook-server-cert"}})
			},
			root: CheckSecret, scenario: "T11",
			others: map[string]expect{CheckServingCertificate: {StatusPass, ""}, CheckDryRun: {StatusPass, ""}},
		},
	}

	// Every case runs with each way of reaching the webhook: the classification is the same;
	// with --connect=port-forward the doctor dials nothing but port-forwards' local ends.
	for _, connect := range ConnectModes() {
		t.Run("connect="+string(connect), func(t *testing.T) {
			w.useDoctor(t, connect)
			t.Run("healthy release: every check passes", func(t *testing.T) {
				w.reset(t)
				w.dialed.take()
				report := w.doctor.Run(context.Background())
				require.True(t, report.Healthy(), text(report))
				require.Len(t, report, len(allChecks()))
				dry, _ := report.Find(CheckDryRun)
				assert.Contains(t, strings.Join(dry.Details, "\n"), `admission webhook "vdynamographdeployment.nvidia.com" denied the request`)
				assert.Contains(t, strings.Join(dry.Details, "\n"), "mutating webhook stamped nvidia.com/dynamo-operator-origin-version=v0.0.0-doctor-test")
				served, _ := report.Find(CheckServingCertificate)
				details := strings.Join(served.Details, "\n")
				if connect == ConnectPortForward {
					assert.Contains(t, details, "through a port-forward to a ready endpoint pod, via the API server: --connect=port-forward")
					assert.Contains(t, details, fmt.Sprintf("pod %s port %d (port-forward): handshake verified", w.r.podName(), w.r.podPort))
					w.expectNoClusterAddressDialed(t)
				} else {
					assert.Contains(t, details, e2eClusterIP+":"+strconv.Itoa(e2eServicePort)+" (ClusterIP of Service dynamo-system/dynamo-webhook-service): handshake verified")
					assert.Contains(t, w.dialed.take(), net.JoinHostPort(e2eClusterIP, strconv.Itoa(e2eServicePort)))
				}
				t.Logf("healthy release:\n%s", text(report))
			})
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					w.reset(t)
					tc.inject(t, w)
					report := w.runUntil(func(report Report) bool {
						roots := report.Roots()
						if len(roots) != 1 || roots[0].ID != tc.root || roots[0].Scenario != tc.scenario {
							return false
						}
						for id, want := range tc.others {
							got, _ := report.Find(id)
							if got.Status != want.status || (want.status == StatusConsequence && got.Scenario != want.scenario) {
								return false
							}
						}
						return true
					})
					t.Logf("%s:\n%s", tc.name, text(report))
					requireOneRoot(t, report, tc.root, tc.scenario, nil, nil)
					for id, want := range tc.others {
						got, _ := report.Find(id)
						assert.Equal(t, want.status, got.Status, "status of %s", id)
						if want.status == StatusConsequence {
							assert.Equal(t, want.scenario, got.Scenario, "scenario named by %s", id)
							assert.Equal(t, []string{tc.root}, got.DependsOn, "%s is a consequence of the root", id)
						}
					}
					for _, res := range report {
						assertNoKeyMaterial(t, res, w.r.serving.keyPEM)
						if res.Status == StatusConsequence || res.Status == StatusSkipped {
							assert.Equal(t, []string{tc.root}, res.DependsOn, "%s depends on the one root", res.ID)
						}
					}
					if connect == ConnectPortForward {
						if served, _ := report.Find(CheckServingCertificate); served.Status != StatusSkipped {
							assert.Contains(t, strings.Join(served.Details, "\n"), "--connect=port-forward", "the details say why it port-forwarded")
						}
						w.expectNoClusterAddressDialed(t)
					}
				})
			}
		})
	}
}

// TestDoctorPortForwardRefusedInPod: with --connect=port-forward, a ready endpoint Pod with
// nothing listening on its webhook port is T6 with "connection refused", as a refused dial
// is with --connect=auto; the refusal comes from the far end of the port-forward (the
// kubelet's error stream).
func TestDoctorPortForwardRefusedInPod(t *testing.T) {
	w := newWorld(t)
	w.useDoctor(t, ConnectPortForward)
	w.reset(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	w.fwd.setBackend(closed)
	t.Cleanup(func() { w.fwd.setBackend(w.fast) })

	report := w.doctor.run(context.Background(), checksByID(t, CheckConfigurations, CheckCABundle, CheckService, CheckEndpoints, CheckServingCertificate))
	t.Logf("\n%s", text(report))
	root := requireOneRoot(t, report, CheckServingCertificate, "T6", []string{"through a port-forward (--connect=port-forward): connection refused"}, nil)
	details := strings.Join(root.Details, "\n")
	assert.Contains(t, details, fmt.Sprintf("pod %s port %d (port-forward): ", w.r.podName(), w.r.podPort))
	assert.Contains(t, details, "connect: connection refused")
	w.expectNoClusterAddressDialed(t)
}
