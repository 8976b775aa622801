package local

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// ConfigAPIVersion and ConfigKind identify a local cluster configuration file.
const (
	ConfigAPIVersion = "gauntlet.dev/v1alpha1"
	ConfigKind       = "LocalCluster"
)

// DefaultKubernetesVersion is the version hack/control-plane.sh builds.
const DefaultKubernetesVersion = workspace.KubernetesVersion

// slots is how many clusters can run side by side with derived ports and ranges.
const slots = 100

// Config describes one local cluster. Every zero field is filled by Complete: ports, the service
// range and the pod range are derived from the cluster name so that two clusters never collide.
type Config struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`

	// Name of the cluster; when a provider name is also given, both must agree.
	Name string `json:"name,omitempty"`
	// KubernetesVersion selects ~/.cache/gauntlet/k8s/<version>/bin for binaries left unset.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// Ports of the control plane and of the node agent's kubelet endpoint.
	Ports Ports `json:"ports,omitempty"`
	// ServiceCIDR is the Service ClusterIP range. It must be loopback (127.0.0.0/8) so that the
	// apiserver can dial ClusterIP:port on this host, where the node agent listens.
	ServiceCIDR string `json:"serviceCIDR,omitempty"`
	// PodCIDR is the range pod network namespaces get addresses from. It must not be loopback:
	// the apiserver rejects loopback addresses in EndpointSlices.
	PodCIDR string `json:"podCIDR,omitempty"`
	// Binaries overrides single executables; unset ones come from the version's bin dir or
	// are built from the workspace.
	Binaries Binaries `json:"binaries,omitempty"`
	// Images maps image repositories (no tag, no digest) to what the node runs for them: an
	// executable, which runs whatever a container's command names, or an object of what the
	// image holds (procnode.Image: binary, entrypoint, programs, files, env). Added to the
	// defaults (the operator image).
	Images map[string]procnode.Image `json:"images,omitempty"`
	// Node controls the process node agent.
	Node NodeOptions `json:"node,omitempty"`
	// CertManager controls the cert-manager processes (controllers and cainjector).
	CertManager CertManagerOptions `json:"certManager,omitempty"`
}

// Ports of one cluster. All must be distinct.
type Ports struct {
	APIServer         int `json:"apiServer,omitempty"`
	Etcd              int `json:"etcd,omitempty"`
	EtcdPeer          int `json:"etcdPeer,omitempty"`
	ControllerManager int `json:"controllerManager,omitempty"`
	Scheduler         int `json:"scheduler,omitempty"`
	Kubelet           int `json:"kubelet,omitempty"`
}

// Binaries names the executables a cluster runs. Relative paths are resolved against the
// configuration file's directory.
type Binaries struct {
	// Dir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl.
	Dir                   string `json:"dir,omitempty"`
	Etcd                  string `json:"etcd,omitempty"`
	KubeAPIServer         string `json:"kubeApiserver,omitempty"`
	KubeControllerManager string `json:"kubeControllerManager,omitempty"`
	KubeScheduler         string `json:"kubeScheduler,omitempty"`
	Kubectl               string `json:"kubectl,omitempty"`
	// Kwokctl is the lifecycle engine; built by hack/local-binaries.sh when unset.
	Kwokctl string `json:"kwokctl,omitempty"`
	// Node is gauntlet-node; built from the workspace when unset.
	Node string `json:"node,omitempty"`
	// CertManager is gauntlet-cert-manager; built from the workspace when unset.
	CertManager string `json:"certManager,omitempty"`
}

// NodeOptions controls the process node.
type NodeOptions struct {
	// Disabled starts a control plane without a node: pods stay Pending.
	Disabled bool `json:"disabled,omitempty"`
	// CoverDir, when set, is given to every container as GOCOVERDIR: coverage-instrumented
	// binaries (go build -cover) write their counters there when they exit. Relative paths are
	// resolved against the configuration file's directory.
	CoverDir string `json:"coverDir,omitempty"`
}

// CertManagerOptions controls cert-manager on the cluster.
type CertManagerOptions struct {
	// Enabled installs cert-manager's CRDs and runs its controllers and cainjector.
	Enabled bool `json:"enabled,omitempty"`
	// Namespace for cert-manager's leases and ClusterIssuer secrets; default cert-manager.
	Namespace string `json:"namespace,omitempty"`
}

// LoadConfig reads a configuration file strictly: unknown fields are errors.
func LoadConfig(path string) (*Config, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // G304: the configuration file the user names (--config)
	if err != nil {
		return nil, fmt.Errorf("reading cluster config: %w", err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("cluster config %s: %w", path, err)
	}
	cfg.resolvePaths(filepath.Dir(path))
	return cfg, nil
}

// ParseConfig decodes YAML strictly and validates what is set.
func ParseConfig(raw []byte) (*Config, error) {
	var cfg Config
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

func (c *Config) resolvePaths(base string) {
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(base, *p)
		}
	}
	b := &c.Binaries
	for _, p := range []*string{&b.Dir, &b.Etcd, &b.KubeAPIServer, &b.KubeControllerManager, &b.KubeScheduler,
		&b.Kubectl, &b.Kwokctl, &b.Node, &b.CertManager, &c.Node.CoverDir} {
		abs(p)
	}
	for repo, img := range c.Images {
		abs(&img.Binary)
		img.Programs, img.Files = absValues(img.Programs, abs), absValues(img.Files, abs)
		c.Images[repo] = img
	}
}

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	versionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)
	loopback  = netip.MustParsePrefix("127.0.0.0/8")
)

// FieldError is a configuration error tied to one field, so users know what to edit.
type FieldError struct {
	Field string
	Value any
	Msg   string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: invalid value %v: %s", e.Field, e.Value, e.Msg)
}

// Validate checks the fields that are set; Complete fills the others.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field string, value any, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Value: fmt.Sprintf("%q", fmt.Sprint(value)), Msg: fmt.Sprintf(format, args...)})
	}
	if c.APIVersion != "" && c.APIVersion != ConfigAPIVersion {
		bad("apiVersion", c.APIVersion, "must be %s", ConfigAPIVersion)
	}
	if c.Kind != "" && c.Kind != ConfigKind {
		bad("kind", c.Kind, "must be %s", ConfigKind)
	}
	if c.Name != "" {
		if err := validateName(c.Name); err != nil {
			bad("name", c.Name, "%s", err)
		}
	}
	if c.KubernetesVersion != "" && !versionRE.MatchString(c.KubernetesVersion) {
		bad("kubernetesVersion", c.KubernetesVersion, "must look like v1.37.0")
	}
	seen := map[int]string{}
	for _, p := range c.Ports.named() {
		if p.port == 0 {
			continue
		}
		if p.port < 1024 || p.port > 65535 {
			bad("ports."+p.name, p.port, "must be between 1024 and 65535")
			continue
		}
		if other, dup := seen[p.port]; dup {
			bad("ports."+p.name, p.port, "already used by ports.%s", other)
		}
		seen[p.port] = p.name
	}
	var svc, pod netip.Prefix
	if c.ServiceCIDR != "" {
		var err error
		svc, err = parseCIDR(c.ServiceCIDR)
		switch {
		case err != nil:
			bad("serviceCIDR", c.ServiceCIDR, "%s", err)
		case !loopback.Contains(svc.Addr()):
			bad("serviceCIDR", c.ServiceCIDR, "must be inside 127.0.0.0/8 so ClusterIPs are dialable on this host")
		case svc.Bits() < 16 || svc.Bits() > 28:
			bad("serviceCIDR", c.ServiceCIDR, "prefix length must be between /16 and /28")
		case svc.Contains(netip.MustParseAddr("127.0.0.1")):
			bad("serviceCIDR", c.ServiceCIDR, "must not contain 127.0.0.1, where the control plane listens")
		}
	}
	if c.PodCIDR != "" {
		var err error
		pod, err = parseCIDR(c.PodCIDR)
		switch {
		case err != nil:
			bad("podCIDR", c.PodCIDR, "%s", err)
		case loopback.Overlaps(pod):
			bad("podCIDR", c.PodCIDR, "must not be loopback: the apiserver rejects loopback EndpointSlice addresses")
		case pod.Bits() < 16 || pod.Bits() > 28:
			bad("podCIDR", c.PodCIDR, "prefix length must be between /16 and /28")
		}
	}
	for repo, img := range c.Images {
		field := fmt.Sprintf("images[%s]", repo)
		switch {
		case repo == "":
			bad("images", repo, "image repository must not be empty")
		case strings.Contains(repo, "@") || strings.Contains(repo[strings.LastIndex(repo, "/")+1:], ":"):
			bad(field, repo, "key must be an image repository without tag or digest")
		case img.Binary == "":
			bad(field, img.Binary, "executable path must not be empty")
		default:
			if err := img.Validate(); err != nil {
				bad(field, repo, "%s", err)
			}
		}
	}
	if c.CertManager.Namespace != "" {
		if err := validateName(c.CertManager.Namespace); err != nil {
			bad("certManager.namespace", c.CertManager.Namespace, "%s", err)
		}
	}
	return errors.Join(errs...)
}

func validateName(name string) error {
	if len(name) > 40 || !nameRE.MatchString(name) {
		return errors.New("must be a DNS label of at most 40 characters (lower case letters, digits, '-')")
	}
	return nil
}

func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, errors.New("must be an IPv4 CIDR such as 127.0.100.0/24")
	}
	if !p.Addr().Is4() {
		return p, errors.New("must be IPv4")
	}
	if p.Masked() != p {
		return p, fmt.Errorf("host bits set; did you mean %s?", p.Masked())
	}
	return p, nil
}

type namedPort struct {
	name string
	port int
}

func (p Ports) named() []namedPort {
	return []namedPort{
		{"apiServer", p.APIServer}, {"etcd", p.Etcd}, {"etcdPeer", p.EtcdPeer},
		{"controllerManager", p.ControllerManager}, {"scheduler", p.Scheduler}, {"kubelet", p.Kubelet},
	}
}

// Complete fills every unset field. others are the configurations of clusters that already
// exist; derived ports and ranges skip theirs, so a hash collision of two names never makes
// two clusters share a port or a range.
func (c *Config) Complete(name string, others []*Config) error {
	if c.Name == "" {
		c.Name = name
	}
	if name != "" && c.Name != name {
		return &FieldError{Field: "name", Value: fmt.Sprintf("%q", c.Name), Msg: fmt.Sprintf("does not match the cluster name %q", name)}
	}
	if c.Name == "" {
		return &FieldError{Field: "name", Value: `""`, Msg: "a cluster needs a name"}
	}
	c.APIVersion, c.Kind = ConfigAPIVersion, ConfigKind
	if c.KubernetesVersion == "" {
		c.KubernetesVersion = DefaultKubernetesVersion
	}
	if c.CertManager.Namespace == "" {
		c.CertManager.Namespace = "cert-manager"
	}
	slot, err := freeSlot(c.Name, others)
	if err != nil {
		return err
	}
	base := 20000 + slot*10 // below Linux's ephemeral range (32768+), so outgoing connections never hold them
	for _, f := range []struct {
		p   *int
		off int
	}{{&c.Ports.APIServer, 0}, {&c.Ports.Etcd, 1}, {&c.Ports.EtcdPeer, 2}, {&c.Ports.ControllerManager, 3},
		{&c.Ports.Scheduler, 4}, {&c.Ports.Kubelet, 5}} {
		if *f.p == 0 {
			*f.p = base + f.off
		}
	}
	if c.ServiceCIDR == "" {
		c.ServiceCIDR = fmt.Sprintf("127.0.%d.0/24", 100+slot)
	}
	if c.PodCIDR == "" {
		c.PodCIDR = fmt.Sprintf("10.244.%d.0/24", slot)
	}
	return c.Validate()
}

// freeSlot derives a slot from the name and moves on while an existing cluster uses it.
func freeSlot(name string, others []*Config) (int, error) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name)) // a hash.Hash's Write never fails
	start := int(h.Sum32() % slots)
	for i := range slots {
		slot := (start + i) % slots
		if !slotTaken(slot, name, others) {
			return slot, nil
		}
	}
	return 0, fmt.Errorf("all %d derived port/range slots are taken by existing clusters; delete one or set ports and ranges explicitly", slots)
}

func slotTaken(slot int, name string, others []*Config) bool {
	base := 20000 + slot*10
	svc := netip.MustParsePrefix(fmt.Sprintf("127.0.%d.0/24", 100+slot))
	pod := netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", slot))
	for _, o := range others {
		if o.Name == name {
			continue
		}
		for _, p := range o.Ports.named() {
			if p.port >= base && p.port < base+10 {
				return true
			}
		}
		if p, err := netip.ParsePrefix(o.ServiceCIDR); err == nil && p.Overlaps(svc) {
			return true
		}
		if p, err := netip.ParsePrefix(o.PodCIDR); err == nil && p.Overlaps(pod) {
			return true
		}
	}
	return false
}

// Conflicts reports a field of c that collides with another existing cluster.
func (c *Config) Conflicts(others []*Config) error {
	var errs []error
	for _, o := range others {
		if o.Name == c.Name {
			continue
		}
		for _, p := range c.Ports.named() {
			for _, q := range o.Ports.named() {
				if p.port == q.port {
					errs = append(errs, &FieldError{Field: "ports." + p.name, Value: p.port, Msg: fmt.Sprintf("used by cluster %q (ports.%s)", o.Name, q.name)})
				}
			}
		}
		if overlaps(c.ServiceCIDR, o.ServiceCIDR) {
			errs = append(errs, &FieldError{Field: "serviceCIDR", Value: c.ServiceCIDR, Msg: fmt.Sprintf("overlaps cluster %q (%s)", o.Name, o.ServiceCIDR)})
		}
		if overlaps(c.PodCIDR, o.PodCIDR) {
			errs = append(errs, &FieldError{Field: "podCIDR", Value: c.PodCIDR, Msg: fmt.Sprintf("overlaps cluster %q (%s)", o.Name, o.PodCIDR)})
		}
	}
	return errors.Join(errs...)
}

func overlaps(a, b string) bool {
	pa, errA := netip.ParsePrefix(a)
	pb, errB := netip.ParsePrefix(b)
	return errA == nil && errB == nil && pa.Overlaps(pb)
}

// PodHostIP is the host's address on the pod network (the first address of the pod range):
// pods reach the apiserver there, and the apiserver's serving certificate names it.
func (c *Config) PodHostIP() string {
	p := netip.MustParsePrefix(c.PodCIDR)
	return p.Addr().Next().String()
}

// NodeName is the name of the cluster's single node.
func (c *Config) NodeName() string { return "gauntlet-" + c.Name }

// absValues is m with abs applied to each value (m's paths resolved against the config's
// directory); nil stays nil.
func absValues(m map[string]string, abs func(*string)) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		abs(&v)
		out[k] = v
	}
	return out
}

// sortedImages returns the image map's repositories in order, for stable output.
func sortedImages(m map[string]procnode.Image) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
