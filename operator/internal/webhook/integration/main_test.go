// Package integration tests the operator's webhooks through a real kube-apiserver (envtest):
// the webhook configurations are the chart's generated manifests, the server is the one
// webhook.Register sets up, and every assertion is what a kubectl user would see.
// Test names carry the scenario IDs of CATALOG.md §A.
package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gauntlet-dev/gauntlet/operator/internal/scheme"
	"github.com/gauntlet-dev/gauntlet/operator/internal/testcluster"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook"
)

const (
	operatorVersion = "v0.9.0-integration"
	defaultImage    = "nvcr.io/dynamo/profiler:integration"
)

var (
	// env is the control plane with the chart's webhook configurations installed.
	env *testcluster.Env
	// k8s is a client that records the apiserver's warnings.
	k8s client.Client
	// warnings collects warnings returned to k8s.
	warnings = &warningRecorder{}
	// excluded is the operator's view of namespaces owned by a namespace-restricted operator.
	excluded = &namespaceSet{set: map[string]bool{}}
	// logs holds the operator's log output (JSON lines).
	logs = &testcluster.LogBuffer{}
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	logger := zap.New(zap.WriteTo(logs), zap.UseDevMode(false))
	ctrllog.SetLogger(logger)

	var err error
	env, err = testcluster.New(testcluster.WithWebhooks(envtest.WebhookInstallOptions{
		Paths: []string{testcluster.WebhookManifestDir()},
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the test control plane: %v\n", err)
		}
	}()

	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandlerWithContext = warnings
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := startOperator(ctx, logger)
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	cancel()
	if err := <-stopped; err != nil {
		fmt.Fprintf(os.Stderr, "operator manager: %v\n", err)
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- operator logs ---\n%s\n", logs.String())
	}
	return code
}

// startOperator runs a manager whose webhook server listens where envtest pointed the
// webhook configurations, and waits until it serves TLS.
func startOperator(ctx context.Context, logger logr.Logger) (<-chan error, error) {
	wio := env.Environment.WebhookInstallOptions
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme.New(),
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{
			Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
		}),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the operator manager: %w", err)
	}
	if err := webhook.Register(mgr, webhook.Config{
		Exclusions: excluded, OperatorVersion: operatorVersion, DefaultDGDRImage: defaultImage,
	}); err != nil {
		return nil, err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()

	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness probe only
		if err == nil {
			_ = conn.Close()
			return stopped, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("webhook server on %s not serving after 30s: %w", addr, err)
		}
		select {
		case err := <-stopped:
			return nil, fmt.Errorf("operator manager exited before serving: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// namespaceSet is a mutable webhook.ExclusionChecker, standing in for the lease watcher's view.
type namespaceSet struct {
	mu  sync.Mutex
	set map[string]bool
}

func (s *namespaceSet) Excluded(ns string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set[ns]
}

func (s *namespaceSet) put(ns string, excluded bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set[ns] = excluded
}

// warningRecorder keeps every warning the apiserver returned.
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}
