// Package testcluster starts a real etcd and kube-apiserver (controller-runtime's envtest) with
// the Dynamo CRDs installed, for the operator's integration tests. The binaries are the ones
// `make control-plane` builds; nothing is downloaded.
package testcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/operator/internal/scheme"
)

// KubernetesVersion is the control-plane version the tests run against: the newest under
// hack/tools/k8s, the default K8S_VERSION (TestKubernetesVersionIsTheDefault).
const KubernetesVersion = "v1.37.2"

// Env is a running test control plane.
type Env struct {
	// Environment is the underlying envtest environment (webhook install options included).
	Environment *envtest.Environment
	// Config reaches the apiserver as a cluster admin.
	Config *rest.Config
	// Client is a cluster-admin client with the operator's scheme.
	Client client.Client
}

// Option customises the environment before it starts.
type Option func(*envtest.Environment)

// WithWebhooks installs the given webhook configurations (as the chart's generated manifests),
// pointed by envtest at a local webhook server it issues certificates for.
func WithWebhooks(opts envtest.WebhookInstallOptions) Option {
	return func(e *envtest.Environment) { e.WebhookInstallOptions = opts }
}

// WithServiceCIDR sets kube-apiserver's --service-cluster-ip-range. With a loopback range
// (e.g. 127.0.100.0/24) the apiserver dials a Service-referenced webhook at ClusterIP:port with
// TLS ServerName <svc>.<ns>.svc, exactly as in a cluster, and a local process listening on that
// port answers.
func WithServiceCIDR(cidr string) Option {
	return func(e *envtest.Environment) {
		e.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", cidr)
	}
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// CRDDir holds the generated CRD manifests (the chart's copy is the only copy).
func CRDDir() string { return filepath.Join(RepoRoot(), "charts", "dynamo-operator", "files", "crds") }

// WebhookManifestDir holds the generated webhook configuration manifests.
func WebhookManifestDir() string {
	return filepath.Join(RepoRoot(), "charts", "dynamo-operator", "files", "webhook")
}

// AssetsDir finds etcd, kube-apiserver and kubectl: $KUBEBUILDER_ASSETS, else the cache
// `make control-plane` fills.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		cache := os.Getenv("GAUNTLET_CACHE")
		if cache == "" {
			base, err := os.UserCacheDir()
			if err != nil {
				return "", fmt.Errorf("locating the user cache dir for control-plane binaries: %w", err)
			}
			cache = filepath.Join(base, "gauntlet")
		}
		dir = filepath.Join(cache, "k8s", KubernetesVersion, "bin")
	}
	for _, bin := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil { //nolint:gosec // G703: KUBEBUILDER_ASSETS/GAUNTLET_CACHE name the binaries to run; trusting them is the point
			return "", fmt.Errorf("control-plane binary %s not found in %s: run `make control-plane` (or set KUBEBUILDER_ASSETS)", bin, dir)
		}
	}
	return dir, nil
}

// Start brings up a control plane for the test and stops it when the test ends. A missing
// binary fails the test: integration coverage is never silently skipped.
func Start(tb testing.TB, opts ...Option) *Env {
	tb.Helper()
	env, err := New(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Errorf("stopping test control plane: %v", err)
		}
	})
	return env
}

// New starts a control plane; the caller must Stop it. Use it from TestMain to share one
// control plane across a package's tests.
func New(opts ...Option) (*Env, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{CRDDir()},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme.New(),
	}
	for _, opt := range opts {
		opt(e)
	}
	cfg, err := e.Start()
	if err != nil {
		return nil, fmt.Errorf("starting etcd + kube-apiserver from %s: %w", assets, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("building a client for the test control plane: %w", err)
	}
	return &Env{Environment: e, Config: cfg, Client: c}, nil
}

// Stop shuts the control plane down.
func (e *Env) Stop() error { return e.Environment.Stop() }

// GeneratedWebhookConfigurations reads controller-gen's webhook manifest, the chart's source of
// truth for the list of webhooks. Callers rename them and set clientConfig as the chart does.
func GeneratedWebhookConfigurations() (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration, error) {
	path := filepath.Join(WebhookManifestDir(), "manifests.yaml")
	raw, err := os.ReadFile(path) //nolint:gosec // G304: the chart's generated manifest in this repository
	if err != nil {
		return nil, nil, fmt.Errorf("reading the generated webhook manifest: %w", err)
	}
	var vwc *admissionregistrationv1.ValidatingWebhookConfiguration
	var mwc *admissionregistrationv1.MutatingWebhookConfiguration
	for _, doc := range strings.Split(string(raw), "\n---") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		switch meta.Kind {
		case "ValidatingWebhookConfiguration":
			vwc = &admissionregistrationv1.ValidatingWebhookConfiguration{}
			err = yaml.Unmarshal([]byte(doc), vwc)
		case "MutatingWebhookConfiguration":
			mwc = &admissionregistrationv1.MutatingWebhookConfiguration{}
			err = yaml.Unmarshal([]byte(doc), mwc)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("decoding %s in %s: %w", meta.Kind, path, err)
		}
	}
	if vwc == nil || mwc == nil {
		return nil, nil, fmt.Errorf("%s lacks a ValidatingWebhookConfiguration or a MutatingWebhookConfiguration: run `make generate`", path)
	}
	return vwc, mwc, nil
}

// LogBuffer collects log output written from many goroutines, for asserting log lines.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
