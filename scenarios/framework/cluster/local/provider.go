// Package local is gauntlet's default cluster provider: a real control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) run by kwokctl's binary runtime from
// locally built binaries, one process node (gauntlet-node) that runs pods as host processes, and
// optionally real cert-manager controllers. It needs no container runtime and no network, and
// implements e2e-framework's E2EClusterProvider so scenarios never know which provider runs them.
//
// A cluster's state (config, kubeconfig, PKI, etcd data, pid and log files) lives in
// StateRoot()/<name>; a cluster outlives the process that created it, and Destroy run from any
// process removes it.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/support"
	"sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/steps"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// DefaultName is the cluster name used when none is given.
const DefaultName = cluster.DefaultName

// Provider creates, describes and destroys one local cluster.
type Provider struct {
	name        string
	version     string
	binDir      string
	cfg         *Config
	images      map[string]procnode.Image
	certManager bool
	noNode      bool
	coverDir    string
	out         io.Writer
	retain      bool

	completed *Config
	readyIn   time.Duration
}

var _ support.E2EClusterProvider = (*Provider)(nil)

// Option configures a Provider (an e2e-framework ClusterOpts).
type Option = support.ClusterOpts

// NewProvider returns a provider for the cluster named DefaultName; WithName changes it.
func NewProvider() *Provider { return &Provider{name: DefaultName} }

// WithConfig uses cfg (fields left zero are derived) for Create.
func WithConfig(cfg *Config) Option {
	return func(p support.E2EClusterProvider) { p.(*Provider).cfg = cfg }
}

// WithImages adds image repository → image mappings for pods (what the node runs for each),
// on top of the config's.
func WithImages(images map[string]procnode.Image) Option {
	return func(p support.E2EClusterProvider) {
		lp := p.(*Provider)
		if lp.images == nil {
			lp.images = map[string]procnode.Image{}
		}
		for k, v := range images {
			lp.images[k] = v
		}
	}
}

// WithCertManager enables cert-manager (CRDs, controllers, cainjector) regardless of the config.
func WithCertManager() Option {
	return func(p support.E2EClusterProvider) { p.(*Provider).certManager = true }
}

// WithoutNode starts the control plane only; pods stay Pending.
func WithoutNode() Option {
	return func(p support.E2EClusterProvider) { p.(*Provider).noNode = true }
}

// WithCoverDir makes the node give every container GOCOVERDIR=dir, where coverage-instrumented
// binaries (the operator built with -cover) write their counters when they exit.
func WithCoverDir(dir string) Option {
	return func(p support.E2EClusterProvider) { p.(*Provider).coverDir = dir }
}

// WithProgress prints each creation and deletion step with its outcome and duration to w.
func WithProgress(w io.Writer) Option {
	return func(p support.E2EClusterProvider) { p.(*Provider).out = w }
}

// WithRetainOnFailure keeps a cluster whose creation failed, for debugging; by default it is
// deleted.
func WithRetainOnFailure() Option {
	return func(p support.E2EClusterProvider) { p.(*Provider).retain = true }
}

// WithName sets the cluster name.
func (p *Provider) WithName(name string) support.E2EClusterProvider {
	p.name = name
	p.completed = nil
	return p
}

// WithVersion selects the Kubernetes version whose binaries are used.
func (p *Provider) WithVersion(version string) support.E2EClusterProvider {
	p.version = version
	return p
}

// WithPath sets the directory holding etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kubectl (default ~/.cache/gauntlet/k8s/<version>/bin).
func (p *Provider) WithPath(path string) support.E2EClusterProvider {
	p.binDir = path
	return p
}

// WithOpts applies provider options such as WithConfig or WithProgress.
func (p *Provider) WithOpts(opts ...support.ClusterOpts) support.E2EClusterProvider {
	for _, o := range opts {
		o(p)
	}
	return p
}

// SetDefaults fills the name; everything else is derived at creation.
func (p *Provider) SetDefaults() support.E2EClusterProvider {
	if p.name == "" {
		p.name = DefaultName
	}
	return p
}

// Create creates the cluster from the options given and returns its kubeconfig path.
func (p *Provider) Create(ctx context.Context, args ...string) (string, error) {
	if len(args) > 0 {
		return "", fmt.Errorf("local provider: Create takes no arguments (got %q); use a config file or options", args)
	}
	cfg := &Config{}
	if p.cfg != nil {
		c := *p.cfg
		cfg = &c
	}
	return p.create(ctx, cfg)
}

// CreateWithConfig creates the cluster from a configuration file (see Config).
func (p *Provider) CreateWithConfig(ctx context.Context, configFile string) (string, error) {
	cfg, err := LoadConfig(configFile)
	if err != nil {
		return "", err
	}
	return p.create(ctx, cfg)
}

// GetKubeconfig returns the path of the cluster's admin kubeconfig.
func (p *Provider) GetKubeconfig() string { return newLayout(p.name).kubeconfig() }

// GenerateKubeconfig returns the admin kubeconfig path after checking the cluster has one.
func (p *Provider) GenerateKubeconfig(args ...string) (string, error) {
	path := p.GetKubeconfig()
	if _, err := clientcmd.LoadFromFile(path); err != nil {
		return "", fmt.Errorf("cluster %q has no usable kubeconfig: %w", p.name, err)
	}
	return path, nil
}

// GetKubectlContext is the kubeconfig context kwokctl wrote.
func (p *Provider) GetKubectlContext() string { return "kwok-" + p.name }

// KubernetesRestConfig returns an admin REST config, or nil when the cluster has no kubeconfig.
func (p *Provider) KubernetesRestConfig() *rest.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", p.GetKubeconfig())
	if err != nil {
		return nil
	}
	return cfg
}

// ReadyIn is how long the last Create took from starting the control plane until the cluster
// was ready (apiserver, node, cert-manager when enabled, default ServiceAccount); binary
// preparation is excluded.
func (p *Provider) ReadyIn() time.Duration { return p.readyIn }

// Config returns the cluster's complete configuration (after Create, or as stored on disk).
func (p *Provider) Config() (*Config, error) {
	if p.completed != nil {
		return p.completed, nil
	}
	cfg, err := LoadConfig(newLayout(p.name).config())
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", p.name, err)
	}
	p.completed = cfg
	return cfg, nil
}

// WaitForControlPlane waits for /readyz, the node (when the cluster has one) and the default
// ServiceAccount.
func (p *Provider) WaitForControlPlane(ctx context.Context, _ klient.Client) error {
	cfg, err := p.Config()
	if err != nil {
		return err
	}
	rc := p.KubernetesRestConfig()
	if rc == nil {
		return fmt.Errorf("cluster %q: no kubeconfig at %s", p.name, p.GetKubeconfig())
	}
	c, err := newClusterClient(rc)
	if err != nil {
		return err
	}
	if err := cluster.WaitAPIServerReady(ctx, c.kube, 30*time.Second); err != nil {
		return err
	}
	if !cfg.Node.Disabled {
		if err := cluster.WaitNodesReady(ctx, c.kube, 30*time.Second, cfg.NodeName()); err != nil {
			return err
		}
	}
	return cluster.WaitDefaultServiceAccount(ctx, c.kube, 30*time.Second)
}

// create runs the creation steps; on failure the partial cluster is deleted unless retained.
func (p *Provider) create(ctx context.Context, cfg *Config) (kubeconfig string, err error) {
	pr := steps.New(p.out)
	l := newLayout(p.name)
	started := time.Now()
	pr.Printf("Creating local cluster %q …\n", p.name)
	var (
		images map[string]procnode.Image
		client *clusterClient
		owned  bool // the state dir is ours to remove on failure
	)
	defer func() {
		if err != nil && owned && !p.retain {
			_ = p.destroy(context.WithoutCancel(ctx), io.Discard)
		}
	}()

	if err := pr.Step("Checking configuration", func() error { return p.complete(cfg, l) }); err != nil {
		return "", err
	}
	owned = true
	if err := pr.Step("Preparing binaries", func() (err error) {
		images, err = resolveBinaries(ctx, cfg)
		return err
	}); err != nil {
		return "", err
	}
	cpStart := time.Now()
	if err := pr.Step("Starting control plane (etcd, apiserver, controllers)", func() error {
		return p.startControlPlane(ctx, cfg, l)
	}); err != nil {
		return "", err
	}
	if err := pr.Step("Waiting for kube-apiserver /readyz", func() error {
		rc, err := clientcmd.BuildConfigFromFlags("", l.kubeconfig())
		if err != nil {
			return fmt.Errorf("loading kubeconfig %s: %w", l.kubeconfig(), err)
		}
		if client, err = newClusterClient(rc); err != nil {
			return err
		}
		return withLog(cluster.WaitAPIServerReady(ctx, client.kube, 30*time.Second), filepath.Join(l.kwokCluster(), "logs", "kube-apiserver.log"))
	}); err != nil {
		return "", err
	}
	if cfg.CertManager.Enabled {
		if err := pr.Step("Installing cert-manager CRDs, starting cert-manager", func() error {
			return p.startCertManager(ctx, cfg, client, l)
		}); err != nil {
			return "", err
		}
	}
	if !cfg.Node.Disabled {
		node := nodeDaemon(cfg, l)
		if err := pr.Step("Starting node "+cfg.NodeName(), func() error {
			if err := writeImages(l.images(), images); err != nil {
				return err
			}
			if err := node.start(); err != nil {
				return err
			}
			return withLog(client.waitNodeReady(ctx, cfg.NodeName(), nodeReadyFile(l), 30*time.Second), node.logFile)
		}); err != nil {
			return "", err
		}
	}
	if cfg.CertManager.Enabled {
		if err := pr.Step("Waiting for cert-manager (a probe Issuer is Ready)", func() error {
			return p.waitCertManager(ctx, cfg, client, l)
		}); err != nil {
			return "", err
		}
	}
	if err := pr.Step("Waiting for ServiceAccount default/default", func() error {
		return cluster.WaitDefaultServiceAccount(ctx, client.kube, 30*time.Second)
	}); err != nil {
		return "", err
	}
	p.readyIn = time.Since(cpStart)
	pr.Printf("Cluster %q is ready: %.1fs from starting the control plane (%.1fs in all)\n",
		p.name, p.readyIn.Seconds(), time.Since(started).Seconds())
	return l.kubeconfig(), nil
}

// complete derives unset fields, rejects collisions with existing clusters and busy ports, and
// refuses to reuse an existing cluster's state.
func (p *Provider) complete(cfg *Config, l layout) error {
	if p.version != "" {
		cfg.KubernetesVersion = p.version
	}
	if p.binDir != "" {
		cfg.Binaries.Dir = p.binDir
	}
	if p.certManager {
		cfg.CertManager.Enabled = true
	}
	if p.noNode {
		cfg.Node.Disabled = true
	}
	if p.coverDir != "" {
		cfg.Node.CoverDir = p.coverDir
	}
	if len(p.images) > 0 && cfg.Images == nil {
		cfg.Images = map[string]procnode.Image{}
	}
	for k, v := range p.images {
		cfg.Images[k] = v
	}
	if err := validateName(p.name); err != nil {
		return &FieldError{Field: "name", Value: strconv.Quote(p.name), Msg: err.Error()}
	}
	// Derive and reserve under a lock: clusters created at the same time by parallel test
	// binaries must see each other's ports and ranges.
	unlock, err := workspace.Lock(filepath.Join(StateRoot(), ".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(l.dir); err == nil {
		return fmt.Errorf("cluster %q already exists (state in %s); delete it first: gauntlet-cluster down --name %s", p.name, l.dir, p.name)
	}
	others, err := existingConfigs()
	if err != nil {
		return err
	}
	if err := cfg.Complete(p.name, others); err != nil {
		return err
	}
	if err := cfg.Conflicts(others); err != nil {
		return err
	}
	if err := hostConflicts(cfg); err != nil {
		return err
	}
	p.completed = cfg
	return writeConfig(cfg, l)
}

// writeConfig records the cluster's configuration in its state directory; its presence
// reserves the cluster's ports and ranges.
func writeConfig(cfg *Config, l layout) error {
	if err := os.MkdirAll(l.dir, 0o750); err != nil {
		return err
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.config(), raw, 0o600); err != nil {
		return fmt.Errorf("writing cluster config: %w", err)
	}
	return nil
}

// hostConflicts rejects ports something else listens on and a pod range the host already uses.
func hostConflicts(cfg *Config) error {
	var errs []error
	for _, np := range cfg.Ports.named() {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(np.port)))
		if err != nil {
			errs = append(errs, &FieldError{Field: "ports." + np.name, Value: np.port, Msg: "port is in use on 127.0.0.1"})
			continue
		}
		_ = ln.Close() // it could listen: the port is free, which is all this asks
	}
	pod := netip.MustParsePrefix(cfg.PodCIDR)
	ifaces, _ := net.Interfaces()
	for _, iface := range ifaces {
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			pfx, err := netip.ParsePrefix(ipn.String())
			if err == nil && pfx.Masked().Overlaps(pod) {
				errs = append(errs, &FieldError{Field: "podCIDR", Value: cfg.PodCIDR, Msg: fmt.Sprintf("overlaps %s on host interface %s", ipn, iface.Name)})
			}
		}
	}
	return errors.Join(errs...)
}

func (p *Provider) startControlPlane(ctx context.Context, cfg *Config, l layout) error {
	for _, d := range []string{l.logs(), l.pids(), l.nodeState()} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	// Record what we run (resolved binaries included), so Destroy and ExportLogs in another
	// process find everything.
	if err := writeConfig(cfg, l); err != nil {
		return err
	}
	kc, err := renderKwokConfig(cfg, l)
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.kwokConfig(), kc, 0o600); err != nil {
		return fmt.Errorf("writing kwokctl config: %w", err)
	}
	return newKwokctl(cfg, l).create(ctx)
}

func nodeDaemon(cfg *Config, l layout) *daemon {
	return &daemon{
		name:   "gauntlet-node",
		binary: cfg.Binaries.Node,
		args: []string{
			"--kubeconfig", l.kubeconfig(),
			"--node-name", cfg.NodeName(),
			"--state-dir", l.nodeState(),
			"--images", l.images(),
			"--service-cidr", cfg.ServiceCIDR,
			"--pod-cidr", cfg.PodCIDR,
			"--kubelet-port", strconv.Itoa(cfg.Ports.Kubelet),
			"--apiserver-host-for-pods", cfg.PodHostIP(),
			"--kubelet-client-ca", filepath.Join(l.pki(), "ca.crt"),
			"--ready-file", nodeReadyFile(l),
			"--cover-dir", cfg.Node.CoverDir,
		},
		dir:     l.nodeState(),
		pidFile: filepath.Join(l.pids(), "gauntlet-node.pid"),
		logFile: filepath.Join(l.logs(), "gauntlet-node.log"),
	}
}

func nodeReadyFile(l layout) string { return filepath.Join(l.nodeState(), "ready") }

func certManagerDaemon(cfg *Config, l layout) *daemon {
	return &daemon{
		name:   "gauntlet-cert-manager",
		binary: cfg.Binaries.CertManager,
		args: []string{
			"--kubeconfig", l.kubeconfig(),
			"--cluster-resource-namespace", cfg.CertManager.Namespace,
		},
		dir:     l.dir,
		pidFile: filepath.Join(l.pids(), "gauntlet-cert-manager.pid"),
		logFile: filepath.Join(l.logs(), "gauntlet-cert-manager.log"),
	}
}

func writeImages(path string, images map[string]procnode.Image) error {
	raw, err := json.MarshalIndent(images, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing image map %s: %w", path, err)
	}
	return nil
}

// withLog appends the tail of a component's log to err, so a failed start explains itself.
func withLog(err error, logFile string) error {
	if err == nil {
		return nil
	}
	if t := tail(logFile, 15); t != "" {
		return fmt.Errorf("%w\nlast lines of %s:\n%s", err, logFile, t)
	}
	return err
}
