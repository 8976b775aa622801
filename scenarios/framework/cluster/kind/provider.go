// Package kind is gauntlet's container cluster provider: real kind clusters (kubelet,
// containerd, kube-proxy, CoreDNS in Docker containers) created with kind's Go API from a node
// image built offline (hack/kind-node-image.sh) or a stock kindest/node image. Images the
// cluster runs are loaded into its nodes, never pulled. It implements e2e-framework's
// E2EClusterProvider, so scenarios never know which provider runs them.
//
// A cluster's kubeconfig lives in StateRoot()/<name>; the cluster itself is the set of Docker
// containers kind labels with its name, so Destroy run from any process removes it.
package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/support"
	"sigs.k8s.io/kind/pkg/cluster"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/steps"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// DefaultName is the cluster name used when none is given.
const DefaultName = cluster.DefaultName

// DefaultKubernetesVersion is the version whose node image is built when none is asked for.
const DefaultKubernetesVersion = workspace.KubernetesVersion

// readyTimeout bounds kind's own wait for the control-plane node to be Ready.
const readyTimeout = 3 * time.Minute

// Provider creates, describes and destroys one kind cluster.
type Provider struct {
	name        string
	version     string
	nodeImage   string
	configFile  string
	images      []string
	certManager bool
	out         io.Writer

	kind *cluster.Provider
}

var _ support.E2EClusterProvider = (*Provider)(nil)

// Option configures a Provider (an e2e-framework ClusterOpts).
type Option = support.ClusterOpts

// NewProvider returns a provider for the cluster named DefaultName; WithName changes it.
func NewProvider() *Provider {
	return &Provider{name: DefaultName, version: DefaultKubernetesVersion,
		kind: cluster.NewProvider(cluster.ProviderWithDocker())}
}

// WithNodeImage uses ref (e.g. kindest/node:v1.37.0, on machines with a registry) instead of
// building the offline node image.
func WithNodeImage(ref string) Option {
	return func(p support.E2EClusterProvider) { p.(*Provider).nodeImage = ref }
}

// WithImages loads these local Docker images into every node after creation.
func WithImages(refs ...string) Option {
	return func(p support.E2EClusterProvider) { p.(*Provider).images = append(p.(*Provider).images, refs...) }
}

// WithCertManager runs real cert-manager controllers and cainjector as Deployments in the
// cluster (namespace cert-manager), from an image built of gauntlet-cert-manager.
func WithCertManager() Option {
	return func(p support.E2EClusterProvider) { p.(*Provider).certManager = true }
}

// WithProgress prints creation steps to w.
func WithProgress(w io.Writer) Option {
	return func(p support.E2EClusterProvider) { p.(*Provider).out = w }
}

// WithName sets the cluster name.
func (p *Provider) WithName(name string) support.E2EClusterProvider {
	p.name = name
	return p
}

// WithVersion selects the Kubernetes version of the node image.
func (p *Provider) WithVersion(version string) support.E2EClusterProvider {
	p.version = version
	return p
}

// WithPath is not used: kind runs through its Go API and needs no executable.
func (p *Provider) WithPath(string) support.E2EClusterProvider { return p }

// WithOpts applies provider options such as WithNodeImage or WithProgress.
func (p *Provider) WithOpts(opts ...support.ClusterOpts) support.E2EClusterProvider {
	for _, o := range opts {
		o(p)
	}
	return p
}

// SetDefaults fills the name and version.
func (p *Provider) SetDefaults() support.E2EClusterProvider {
	if p.name == "" {
		p.name = DefaultName
	}
	if p.version == "" {
		p.version = DefaultKubernetesVersion
	}
	return p
}

// Create creates the cluster from kind/cluster.yaml and returns its kubeconfig path.
func (p *Provider) Create(ctx context.Context, args ...string) (string, error) {
	if len(args) > 0 {
		return "", fmt.Errorf("kind provider: Create takes no arguments (got %q); use CreateWithConfig or options", args)
	}
	return p.create(ctx)
}

// CreateWithConfig creates the cluster from a kind v1alpha4 configuration file (e.g. one of
// kind/*.yaml with worker nodes); the host's quirk patches are added to it.
func (p *Provider) CreateWithConfig(ctx context.Context, configFile string) (string, error) {
	p.configFile = configFile
	return p.create(ctx)
}

// StateRoot holds one directory per kind cluster gauntlet created: <cache>/kind/clusters.
func StateRoot() string { return filepath.Join(workspace.CacheDir(), "kind", "clusters") }

// GetKubeconfig returns the path of the cluster's admin kubeconfig.
func (p *Provider) GetKubeconfig() string {
	return filepath.Join(StateRoot(), p.name, "kubeconfig.yaml")
}

// GenerateKubeconfig writes the admin kubeconfig anew from the cluster and returns its path.
func (p *Provider) GenerateKubeconfig(...string) (string, error) {
	if err := p.kind.ExportKubeConfig(p.name, p.GetKubeconfig(), false); err != nil {
		return "", fmt.Errorf("exporting the kubeconfig of kind cluster %q: %w", p.name, err)
	}
	return p.GetKubeconfig(), nil
}

// GetKubectlContext is the kubeconfig context kind writes.
func (p *Provider) GetKubectlContext() string { return "kind-" + p.name }

// KubernetesRestConfig returns an admin REST config, or nil when the cluster has no kubeconfig.
func (p *Provider) KubernetesRestConfig() *rest.Config {
	cfg, err := p.restConfig()
	if err != nil {
		return nil
	}
	return cfg
}

// restConfig is the admin REST config from the cluster's kubeconfig; an error names the
// cluster when there is none (it was deleted).
func (p *Provider) restConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", p.GetKubeconfig())
	if err != nil {
		return nil, fmt.Errorf("reading kind cluster %s's kubeconfig (is the cluster deleted?): %w", p.name, err)
	}
	return cfg, nil
}

// List names the kind clusters on this machine.
func (p *Provider) List() ([]string, error) {
	names, err := p.kind.List()
	if err != nil {
		return nil, fmt.Errorf("listing kind clusters: %w", err)
	}
	return names, nil
}

// Exists says whether a kind cluster of this name exists.
func (p *Provider) Exists() (bool, error) {
	names, err := p.List()
	return slices.Contains(names, p.name), err
}

// WaitForControlPlane waits for /readyz, every node Ready and the default ServiceAccount.
func (p *Provider) WaitForControlPlane(ctx context.Context, _ klient.Client) error {
	rc := p.KubernetesRestConfig()
	if rc == nil {
		return fmt.Errorf("kind cluster %q: no kubeconfig at %s", p.name, p.GetKubeconfig())
	}
	return waitClusterReady(ctx, rc, time.Minute)
}

// ExportLogs collects what `kind export logs` does: every node's journal, kubelet and
// containerd logs, and the pods' logs.
func (p *Provider) ExportLogs(_ context.Context, dir string) error {
	if err := p.kind.CollectLogs(p.name, dir); err != nil {
		return fmt.Errorf("exporting the logs of kind cluster %q to %s: %w", p.name, dir, err)
	}
	return nil
}

// Destroy deletes the cluster and checks that none of its containers is left (kind removes
// their volumes with them; its shared Docker network "kind" stays, as kind leaves it).
func (p *Provider) Destroy(context.Context) error {
	if err := p.kind.Delete(p.name, p.GetKubeconfig()); err != nil {
		return fmt.Errorf("deleting kind cluster %q: %w", p.name, err)
	}
	if err := os.RemoveAll(filepath.Dir(p.GetKubeconfig())); err != nil {
		return err
	}
	left, err := containersOf(p.name)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("deleting kind cluster %q left containers behind: %s (remove them with `docker rm -f -v %s`)",
			p.name, strings.Join(left, ", "), strings.Join(left, " "))
	}
	return nil
}

// create runs the creation steps; kind itself removes the containers of a failed create, and
// a failure after that deletes the cluster.
func (p *Provider) create(ctx context.Context) (kubeconfig string, err error) {
	pr := steps.New(p.out)
	started := time.Now()
	pr.Printf("Creating kind cluster %q (Kubernetes %s) …\n", p.name, p.version)
	var (
		cfg     *clusterConfig
		created bool
	)
	defer func() {
		if err != nil && created {
			if derr := p.Destroy(context.WithoutCancel(ctx)); derr != nil {
				err = errors.Join(err, derr)
			}
		}
	}()
	if err := pr.Step("Checking Docker and the cluster name", func() error { return p.checkFree(ctx) }); err != nil {
		return "", err
	}
	if p.nodeImage == "" {
		if err := pr.Step("Building the offline node image (hack/kind-node-image.sh)", func() (err error) {
			p.nodeImage, err = BuildNodeImage(ctx, p.version, p.out)
			return err
		}); err != nil {
			return "", err
		}
	}
	if err := pr.Step("Checking the host (privileged containers, cgroups, oom_score_adj)", func() (err error) {
		cfg, err = p.hostConfig(ctx)
		return err
	}); err != nil {
		return "", err
	}
	for _, q := range cfg.quirks {
		pr.Printf("   host quirk: %s\n", q)
	}
	nodesStart := time.Now()
	if err := pr.Step("Creating nodes from "+p.nodeImage, func() error {
		if err := os.MkdirAll(filepath.Dir(p.GetKubeconfig()), 0o750); err != nil {
			return err
		}
		created = true // kind removes what it made on failure; we remove the state dir
		err := p.kind.Create(p.name,
			cluster.CreateWithV1Alpha4Config(cfg.cluster),
			cluster.CreateWithNodeImage(p.nodeImage),
			cluster.CreateWithWaitForReady(readyTimeout),
			cluster.CreateWithKubeconfigPath(p.GetKubeconfig()),
			cluster.CreateWithDisplayUsage(false),
			cluster.CreateWithDisplaySalutation(false))
		if err != nil {
			return fmt.Errorf("kind could not create cluster %q: %w", p.name, err)
		}
		return nil
	}); err != nil {
		return "", err
	}
	rc := p.KubernetesRestConfig()
	if rc == nil {
		return "", fmt.Errorf("kind cluster %q: kind wrote no usable kubeconfig at %s", p.name, p.GetKubeconfig())
	}
	if err := pr.Step("Fencing the cluster network (no Service or pod packet leaves a node)", func() error {
		return p.fenceClusterNetwork(ctx, cfg.cluster)
	}); err != nil {
		return "", err
	}
	if len(cfg.cluster.Nodes) > 1 {
		if err := pr.Step("Wiring the pod network between the nodes", func() error { return p.wirePodNetwork(ctx, rc) }); err != nil {
			return "", err
		}
	}
	if len(p.images) > 0 {
		if err := pr.Step("Loading images "+strings.Join(p.images, ", "), func() error { return p.LoadImages(ctx, p.images...) }); err != nil {
			return "", err
		}
	}
	if p.certManager {
		if err := pr.Step("Starting cert-manager (controllers and cainjector Deployments)", func() error {
			return p.installCertManager(ctx, rc)
		}); err != nil {
			return "", err
		}
	}
	if err := pr.Step("Waiting for nodes and ServiceAccount default/default", func() error {
		return waitClusterReady(ctx, rc, time.Minute)
	}); err != nil {
		return "", err
	}
	pr.Printf("Cluster %q is ready: %.1fs from creating the nodes (%.1fs in all)\n",
		p.name, time.Since(nodesStart).Seconds(), time.Since(started).Seconds())
	return p.GetKubeconfig(), nil
}

// checkFree fails fast when Docker is unreachable or the name is taken.
func (p *Provider) checkFree(ctx context.Context) error {
	if err := dockerReachable(ctx); err != nil {
		return err
	}
	exists, err := p.Exists()
	if err != nil {
		return err
	}
	if exists {
		return fmt.Errorf("kind cluster %q already exists; delete it (make cluster-down PROVIDER=kind CLUSTER=%s) or choose another name", p.name, p.name)
	}
	return nil
}
