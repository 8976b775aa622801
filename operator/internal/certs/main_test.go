package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gauntlet-dev/gauntlet/operator/internal/testcluster"
)

// dgdrCRD is the CRD whose conversion webhook the operator injects.
const dgdrCRD = "dynamographdeploymentrequests.nvidia.com"

// The control plane is started by the first test that needs it, so the unit tests run
// without the binaries; TestMain stops it.
var (
	clusterOnce sync.Once
	cluster     *testcluster.Env
	clusterErr  error
)

func TestMain(m *testing.M) {
	// certwatcher logs through controller-runtime's global logger.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping test control plane: %v\n", err)
		}
	}
	os.Exit(code)
}

func testEnv(t *testing.T) *testcluster.Env {
	t.Helper()
	clusterOnce.Do(func() { cluster, clusterErr = testcluster.New() })
	require.NoError(t, clusterErr)
	return cluster
}

// eventually polls check until it returns nil or timeout passes, then fails with its last error.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			require.Failf(t, "timed out", "%s: not true after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logRecorder keeps a Controller's log lines for assertions and prints them if the test fails.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func newLogRecorder(t *testing.T) (*logRecorder, logr.Logger) {
	r := &logRecorder{}
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range r.all() {
				t.Log(l)
			}
		}
	})
	return r, funcr.New(func(prefix, args string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.lines = append(r.lines, args)
	}, funcr.Options{})
}

func (r *logRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// line returns the first log line containing every part.
func (r *logRecorder) line(parts ...string) (string, error) {
	for _, l := range r.all() {
		if containsAll(l, parts) {
			return l, nil
		}
	}
	return "", fmt.Errorf("no log line contains all of %q", parts)
}

// count returns how many log lines contain every part.
func (r *logRecorder) count(parts ...string) int {
	n := 0
	for _, l := range r.all() {
		if containsAll(l, parts) {
			n++
		}
	}
	return n
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// fixture is one operator installation: a namespace with its Secret and Service names, its
// own webhook configurations and cert directory.
type fixture struct {
	t                               *testing.T
	env                             *testcluster.Env
	ns, secret, svc, vwc, mwc       string
	certDir                         string
	logs                            *logRecorder
	log                             logr.Logger
	checkInterval, overlap, retries time.Duration
	// propagation is the controllers' CAPropagation (none by default: most tests are about
	// other timings).
	propagation time.Duration
}

func newFixture(t *testing.T, id string) *fixture {
	t.Helper()
	env := testEnv(t)
	f := &fixture{ //nolint:gosec // G101: secret is the name of a Kubernetes Secret, not a credential
		t: t, env: env,
		ns: "certs-" + id, secret: "webhook-server-cert", svc: "dynamo-webhook-service",
		vwc: "dynamo-validating-" + id, mwc: "dynamo-mutating-" + id,
		certDir:       filepath.Join(t.TempDir(), "serving-certs"),
		checkInterval: 300 * time.Millisecond,
	}
	f.logs, f.log = newLogRecorder(t)
	ctx := context.Background()
	must(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}))

	webhook := func(name string) (admissionregistrationv1.WebhookClientConfig, []admissionregistrationv1.RuleWithOperations) {
		return admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: f.ns, Name: f.svc, Path: ptr.To("/" + name), Port: ptr.To[int32](443)},
			}, []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"certs.gauntlet.test"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}},
			}}
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: f.vwc}}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: f.mwc}}
	for _, n := range []string{"one", "two"} {
		cc, rules := webhook("validate-" + n)
		vwc.Webhooks = append(vwc.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name: "validate-" + n + ".certs.gauntlet.test", ClientConfig: cc, Rules: rules,
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
		})
		cc, rules = webhook("mutate-" + n)
		mwc.Webhooks = append(mwc.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name: "mutate-" + n + ".certs.gauntlet.test", ClientConfig: cc, Rules: rules,
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
		})
	}
	must(t, env.Client.Create(ctx, vwc))
	must(t, env.Client.Create(ctx, mwc))
	t.Cleanup(func() {
		_ = client.IgnoreNotFound(env.Client.Delete(context.Background(), vwc))
		_ = client.IgnoreNotFound(env.Client.Delete(context.Background(), mwc))
	})

	// The installed CRD has no conversion webhook; point it at this fixture's Service.
	updateRetrying(t, env.Client, client.ObjectKey{Name: dgdrCRD}, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig: &apiextensionsv1.WebhookClientConfig{
					Service: &apiextensionsv1.ServiceReference{Namespace: f.ns, Name: f.svc, Path: ptr.To("/convert"), Port: ptr.To[int32](443)},
				},
				ConversionReviewVersions: []string{"v1"},
			},
		}
	})
	return f
}

// updateRetrying reads the object named key, applies mutate and writes it back, retrying on
// conflicts with other writers (the Controller under test).
func updateRetrying[T any, PT interface {
	*T
	client.Object
}](t *testing.T, c client.Client, key client.ObjectKey, mutate func(PT)) {
	t.Helper()
	ctx := context.Background()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj := PT(new(T))
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Update(ctx, obj)
	}))
}

func must(t *testing.T, err error) {
	t.Helper()
	require.NoError(t, err)
}

func (f *fixture) options() Options {
	return Options{
		Mode: ModeAutomatic, Namespace: f.ns, SecretName: f.secret, ServiceName: f.svc,
		CertDir: f.certDir, OLMCertDir: filepath.Join(f.t.TempDir(), "olm"),
		CheckInterval:                   f.checkInterval,
		CAPropagation:                   f.propagation,
		ValidatingWebhookConfigurations: []string{f.vwc},
		MutatingWebhookConfigurations:   []string{f.mwc},
		ConversionCRDs:                  []string{dgdrCRD},
	}
}

// controller builds a Controller as the operator would, as the cluster admin.
func (f *fixture) controller(opts Options) *Controller { return f.controllerAs(opts, f.env.Config) }

// controllerAs builds a Controller reaching the API server as cfg's user.
func (f *fixture) controllerAs(opts Options, cfg *rest.Config) *Controller {
	f.t.Helper()
	c, err := New(cfg, opts, f.log)
	must(f.t, err)
	if f.overlap != 0 {
		c.overlapFor = f.overlap
	}
	if f.retries != 0 {
		c.retry.Cap = f.retries
	}
	return c
}

// bootstrap runs Bootstrap with a deadline and fails the test on error.
func (f *fixture) bootstrap(c *Controller) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(f.t, c.Bootstrap(ctx))
}

// start runs the Controller as the manager would until the test ends.
func start(t *testing.T, c *Controller) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done, "Start returned")
	})
}

func (f *fixture) getSecret() (*corev1.Secret, error) {
	var s corev1.Secret
	err := f.env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: f.secret}, &s)
	return &s, err
}

func (f *fixture) mustSecret() *corev1.Secret {
	f.t.Helper()
	s, err := f.getSecret()
	must(f.t, err)
	return s
}

// caBundles returns every caBundle the operator is responsible for, labelled by place.
func (f *fixture) caBundles() (map[string][]byte, error) {
	ctx := context.Background()
	out := map[string][]byte{}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := f.env.Client.Get(ctx, client.ObjectKey{Name: f.vwc}, &vwc); err != nil {
		return nil, err
	}
	for _, w := range vwc.Webhooks {
		out["ValidatingWebhookConfiguration "+f.vwc+" webhook "+w.Name] = w.ClientConfig.CABundle
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := f.env.Client.Get(ctx, client.ObjectKey{Name: f.mwc}, &mwc); err != nil {
		return nil, err
	}
	for _, w := range mwc.Webhooks {
		out["MutatingWebhookConfiguration "+f.mwc+" webhook "+w.Name] = w.ClientConfig.CABundle
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := f.env.Client.Get(ctx, client.ObjectKey{Name: dgdrCRD}, &crd); err != nil {
		return nil, err
	}
	out["CRD "+dgdrCRD+" conversion"] = crd.Spec.Conversion.Webhook.ClientConfig.CABundle
	return out, nil
}

// bundlesEqual checks that every caBundle is exactly want.
func (f *fixture) bundlesEqual(want []byte) error {
	bundles, err := f.caBundles()
	if err != nil {
		return err
	}
	if len(bundles) != 5 {
		return fmt.Errorf("found %d caBundles, want 5 (2 validating, 2 mutating, 1 CRD)", len(bundles))
	}
	for place, got := range bundles {
		if string(got) != string(want) {
			return fmt.Errorf("%s has caBundle of %d bytes, not the expected %d bytes", place, len(got), len(want))
		}
	}
	return nil
}

// filesMatch checks that the served files hold the Secret's certificate and key.
func (f *fixture) filesMatch(s *corev1.Secret) error {
	for _, k := range []string{keyTLSCert, keyTLSKey} {
		b, err := os.ReadFile(filepath.Join(f.certDir, k)) //nolint:gosec // G304: a fixed name under the fixture's t.TempDir()
		if err != nil {
			return err
		}
		if string(b) != string(s.Data[k]) {
			return fmt.Errorf("%s in %s differs from the Secret's", k, f.certDir)
		}
	}
	return nil
}

// tlsServer serves TLS with the Controller's certificate source, as the webhook server does.
func tlsServer(t *testing.T, c *Controller) string {
	t.Helper()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	c.TLSConfig(cfg)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	must(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.(*tls.Conn).Handshake()
			_ = conn.Close()
		}
	}()
	return ln.Addr().String()
}

// served dials addr as the API server would (trusting caPEM, expecting serverName) and
// returns the certificate presented.
func served(addr, serverName string, caPEM []byte) (*x509.Certificate, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("CA bundle holds no certificate")
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }() // only the handshake mattered; nothing was written
	return conn.ConnectionState().PeerCertificates[0], nil
}

// servesCertificate checks that addr presents want, verified as served does.
func servesCertificate(addr, serverName string, caPEM []byte, want *x509.Certificate) error {
	got, err := served(addr, serverName, caPEM)
	if err != nil {
		return err
	}
	if got.SerialNumber.Cmp(want.SerialNumber) != 0 {
		return fmt.Errorf("served serial %x, want %x", got.SerialNumber, want.SerialNumber)
	}
	return nil
}

func leafOf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(s.Data[keyTLSCert])
	must(t, err)
	return certs[0]
}

func caOf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(s.Data[keyCACert])
	must(t, err)
	return certs[0]
}
