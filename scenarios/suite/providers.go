package suite

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/workspace"

	"github.com/gauntlet-dev/gauntlet/scenarios/cluster/local"
)

// Providers the suites know. Only local exists so far.
const (
	ProviderLocal = "local"
	ProviderKind  = "kind"
)

// DefaultOperatorVersion is stamped into the operator when neither --operator-version nor
// GAUNTLET_OPERATOR_VERSION says otherwise.
const DefaultOperatorVersion = "v0.0.0-e2e"

// options are a suite run's settings: flags, with environment variables as defaults so that
// `make e2e-… PROVIDER=… KEEP_CLUSTER=1` and plain `go test` agree.
type options struct {
	provider          string
	kubernetesVersion string
	keepCluster       bool
	operatorVersion   string
	output            string
	clusterName       string
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.provider, "provider", envOr("GAUNTLET_PROVIDER", ProviderLocal), "Cluster provider: local or kind (env GAUNTLET_PROVIDER).")
	fs.StringVar(&o.kubernetesVersion, "kubernetes-version", envOr("K8S_VERSION", local.DefaultKubernetesVersion), "Kubernetes version of the cluster (env K8S_VERSION).")
	fs.BoolVar(&o.keepCluster, "keep-cluster", os.Getenv("KEEP_CLUSTER") == "1", "Keep the cluster after the suite and reuse it next time (env KEEP_CLUSTER=1).")
	fs.StringVar(&o.operatorVersion, "operator-version", envOr("GAUNTLET_OPERATOR_VERSION", DefaultOperatorVersion), "Version stamped into the operator under test (env GAUNTLET_OPERATOR_VERSION).")
	fs.StringVar(&o.output, "e2e-output", os.Getenv("GAUNTLET_E2E_OUTPUT"), "Directory of the suites' reports (default <workspace>/_output/e2e; env GAUNTLET_E2E_OUTPUT).")
	fs.StringVar(&o.clusterName, "cluster-name", "", "Cluster name (default e2e-<suite>, plus -<pid> unless the cluster is kept).")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// complete fills the derived defaults and rejects unknown values.
func (o *options) complete(suite string) error {
	switch o.provider {
	case ProviderLocal:
	case ProviderKind:
		return fmt.Errorf("provider %q is not implemented yet: there is no kind provider in scenarios/cluster yet; run with --provider=%s (GAUNTLET_PROVIDER=%s)", ProviderKind, ProviderLocal, ProviderLocal)
	default:
		return fmt.Errorf("unknown provider %q (want %s or %s)", o.provider, ProviderLocal, ProviderKind)
	}
	if o.clusterName == "" {
		o.clusterName = "e2e-" + suite
		if !o.keepCluster {
			// Two runs of one suite (make test and make e2e) may overlap.
			o.clusterName += "-" + strconv.Itoa(os.Getpid()%100000)
		}
	}
	if o.output == "" {
		root, err := workspace.Root()
		if err != nil {
			return fmt.Errorf("locating _output/e2e: %w (or pass --e2e-output)", err)
		}
		o.output = filepath.Join(root, "_output", "e2e")
	}
	return nil
}

// clusterRequest is what a suite needs from a provider.
type clusterRequest struct {
	opts        options
	certManager bool
	progress    io.Writer
}

// startCluster creates the suite's cluster, or reuses the kept one, and connects to it.
// reused says whether it already existed.
func startCluster(ctx context.Context, req clusterRequest, pr *progress) (c *Cluster, reused bool, err error) {
	// complete has rejected every provider but local.
	return startLocal(ctx, req, pr)
}

type localBackend struct{ p *local.Provider }

func (b localBackend) exportLogs(ctx context.Context, dir string) error {
	return b.p.ExportLogs(ctx, dir)
}

// dialService dials the ClusterIP directly: on a local cluster the node agent listens on
// ClusterIP:port on this host's loopback range, exactly where the API server connects.
func (b localBackend) dialService(ctx context.Context, clusterIP string, port int32) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort(clusterIP, strconv.Itoa(int(port))))
}

func (b localBackend) destroy(ctx context.Context) error {
	cfg, cfgErr := b.p.Config()
	if err := b.p.Destroy(ctx); err != nil {
		return err
	}
	if cfgErr == nil {
		if left := local.Leftovers(cfg); len(left) > 0 {
			return fmt.Errorf("deleting cluster %s left behind:\n  %s", cfg.Name, strings.Join(left, "\n  "))
		}
	}
	return nil
}

func startLocal(ctx context.Context, req clusterRequest, pr *progress) (*Cluster, bool, error) {
	o := req.opts
	var operator string
	if err := pr.step("Building dynamo-operator "+o.operatorVersion, func() (err error) {
		operator, err = workspace.BuildOperator(ctx, o.operatorVersion)
		return err
	}); err != nil {
		return nil, false, err
	}
	p := local.NewProvider()
	p.WithName(o.clusterName)
	p.WithVersion(o.kubernetesVersion)
	p.WithOpts(local.WithProgress(req.progress), local.WithImages(map[string]string{local.OperatorImage: operator}))
	if req.certManager {
		p.WithOpts(local.WithCertManager())
	}

	names, err := local.Clusters()
	if err != nil {
		return nil, false, err
	}
	reused := slices.Contains(names, o.clusterName)
	if reused && !o.keepCluster {
		return nil, false, fmt.Errorf("local cluster %q already exists; delete it (make cluster-down CLUSTER=%s) or keep and reuse it with KEEP_CLUSTER=1", o.clusterName, o.clusterName)
	}
	if reused {
		if err := pr.step("Reusing kept local cluster "+o.clusterName, func() error { return checkReusable(ctx, p, req, operator) }); err != nil {
			return nil, false, err
		}
	} else if _, err := p.Create(ctx); err != nil {
		return nil, false, fmt.Errorf("creating local cluster %s: %w", o.clusterName, err)
	}
	cfg, err := p.Config()
	if err != nil {
		return nil, false, err
	}
	cmNamespace := ""
	if cfg.CertManager.Enabled {
		cmNamespace = cfg.CertManager.Namespace
	}
	c, err := newCluster(o.clusterName, ProviderLocal, p.GetKubeconfig(), o.operatorVersion, cmNamespace, localBackend{p}, pr.printf)
	if err != nil {
		if !reused {
			_ = p.Destroy(context.WithoutCancel(ctx))
		}
		return nil, false, err
	}
	return c, reused, nil
}

// checkReusable makes sure a kept cluster can serve this run: it is up, has cert-manager if
// needed, and runs the operator binary just built.
func checkReusable(ctx context.Context, p *local.Provider, req clusterRequest, operator string) error {
	cfg, err := p.Config()
	if err != nil {
		return err
	}
	var problems []string
	if req.certManager && !cfg.CertManager.Enabled {
		problems = append(problems, "it has no cert-manager, which this suite needs")
	}
	if got := cfg.Images[local.OperatorImage]; got != operator {
		problems = append(problems, fmt.Sprintf("it maps image %s to %q, this run built %q (another --operator-version?)", local.OperatorImage, got, operator))
	}
	if cfg.KubernetesVersion != req.opts.kubernetesVersion {
		problems = append(problems, fmt.Sprintf("it runs Kubernetes %s, this run asks for %s", cfg.KubernetesVersion, req.opts.kubernetesVersion))
	}
	if len(problems) > 0 {
		return fmt.Errorf("kept local cluster %q cannot be reused: %s; delete it with `make cluster-down CLUSTER=%s`",
			cfg.Name, strings.Join(problems, "; "), cfg.Name)
	}
	if err := p.WaitForControlPlane(ctx, nil); err != nil {
		return fmt.Errorf("kept local cluster %q is not healthy: %w; delete it with `make cluster-down CLUSTER=%s`", cfg.Name, err, cfg.Name)
	}
	return nil
}
