package local_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/local"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
	"github.com/stretchr/testify/require"
)

// The conformance suite runs against one cluster (node and cert-manager enabled) created
// through e2e-framework exactly as suites do; TestSecondClusterSideBySide adds a second one.
// `go test -short` runs only the unit tests.

// TestImage is the image repository the suite maps to gauntlet-testserver.
const TestImage = "gauntlet.dev/testserver"

const testServerPackage = "./scenarios/framework/cluster/local/internal/gauntlet-testserver"

var (
	testenv     env.Environment
	provider    *local.Provider
	clusterName = fmt.Sprintf("conformance-%d", os.Getpid()%10000)
	testServer  string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctx := context.Background()
	built, err := workspace.Build(ctx, workspace.BinDir(), workspace.BuildOptions{}, testServerPackage)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testServer = built[testServerPackage]

	provider = local.NewProvider()
	testenv = env.NewWithConfig(envconf.New())
	testenv.Setup(envfuncs.CreateClusterWithOpts(provider, clusterName,
		local.WithImages(map[string]procnode.Image{TestImage: {Binary: testServer}}),
		local.WithCertManager(),
		local.WithProgress(os.Stderr),
	))
	code := testenv.Run(m)
	if cfg, err := provider.Config(); err == nil {
		fmt.Fprintf(os.Stderr, "local cluster %q ready in %.1fs (from starting the control plane; includes node and cert-manager)\n",
			clusterName, provider.ReadyIn().Seconds())
		if code != 0 {
			dest := filepath.Join(artifactsDir(), clusterName)
			if err := provider.ExportLogs(ctx, dest); err != nil {
				fmt.Fprintf(os.Stderr, "exporting logs: %v\n", err)
			}
			fmt.Fprintf(os.Stderr, "cluster logs exported to %s\n", dest)
		}
		if err := provider.Destroy(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "destroying cluster %q: %v\n", clusterName, err)
			code = 1
		}
		if left := local.Leftovers(cfg); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "teardown of %q left behind:\n  %s\n", clusterName, strings.Join(left, "\n  "))
			code = 1
		}
	}
	return code
}

func artifactsDir() string {
	if d := os.Getenv("GAUNTLET_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "gauntlet-artifacts")
}

func kubeClient(t *testing.T, cfg *envconf.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	require.NoError(t, err)
	return cs
}

// kubectl runs the cluster's kubectl (the binary built with the control plane).
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cfg, err := provider.Config()
	require.NoError(t, err)
	cmd := exec.Command(cfg.Binaries.Kubectl, append([]string{"--kubeconfig", provider.GetKubeconfig()}, args...)...) //nolint:gosec // G204: the cluster's own kubectl, with the test's arguments
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// tlsMaterial is a CA and a serving certificate for one Service DNS name.
type tlsMaterial struct {
	caPEM, certPEM, keyPEM []byte
	pool                   *x509.CertPool
}

func newTLSMaterial(t *testing.T, dnsName string) *tlsMaterial {
	t.Helper()
	sc, err := pki.NewServingCertificate(dnsName)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(sc.CA)
	return &tlsMaterial{caPEM: sc.CAPEM, certPEM: sc.CertPEM, keyPEM: sc.KeyPEM, pool: pool}
}

// serviceGet calls the test server through its Service from this host, the way the apiserver
// does: ClusterIP:port, TLS with the Service's DNS name.
func serviceGet(clusterIP string, port int, serverName string, pool *x509.CertPool, path string, into any) error {
	client := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{ServerName: serverName, RootCAs: pool, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		},
	}
	resp, err := client.Get("https://" + net.JoinHostPort(clusterIP, strconv.Itoa(port)) + path)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }() // read to the end below
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return json.Unmarshal(body, into)
}

func restConfig(cfg *envconf.Config) *rest.Config { return cfg.Client().RESTConfig() }
