// Package cluster is what the suites know of cluster providers: a registry of providers by
// name (each registers itself from its package's init, as cert-manager's controllers do), the
// request a suite makes, and the operations only a provider can perform on a cluster it runs.
// The providers live in the subpackages; package providers links them all in.
package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"sigs.k8s.io/e2e-framework/support"
)

// Request is what a suite needs from a provider.
type Request struct {
	// Name of the cluster (kind, local) or a label for it (existing).
	Name string
	// KubernetesVersion the cluster should run.
	KubernetesVersion string
	// OperatorVersion is stamped into the operator the provider builds and runs.
	OperatorVersion string
	// Keep the cluster after the suite, and reuse one kept earlier.
	Keep bool
	// CertManager asks for cert-manager's controllers and cainjector.
	CertManager bool
	// Images are further images the cluster's pods run, by the reference a chart renders (a
	// target's, say): local runs the binary for the image, kind builds the image FROM scratch
	// around it.
	Images map[string]Image
	// CoverDir, when set, asks for a coverage-instrumented operator whose processes write their
	// counters there when they exit (`make e2e COVER=1`). Only the local provider offers it.
	CoverDir string
	// Progress receives the provider's own step lines.
	Progress io.Writer
	// Step runs one named step of the suite's progress.
	Step func(title string, fn func() error) error
}

// Image is what an image a chart names holds, built here: static programs at their paths in
// the image, and files. A FROM scratch image of it holds these and nothing else.
type Image struct {
	// Binary is the image's entrypoint, held at Entrypoint (a clean absolute path, e.g. /manager).
	Binary, Entrypoint string
	// Programs are further programs the image holds: path in the image → binary here.
	Programs map[string]string
	// Files are files and directories the image holds: path in the image → path here.
	Files map[string]string
	// Env is the image's own environment (its ENV).
	Env map[string]string
}

// CreateOrReuse is what a provider does with the cluster req names: create makes it when none
// exists; one that exists is reused when req.Keep says so (reuse checks it, as the step "Reusing
// kept <provider> cluster <name>") and is an error otherwise, naming deleteCommand, the command
// that deletes it.
func (req Request) CreateOrReuse(provider, deleteCommand string, exists bool, create, reuse func() error) error {
	switch {
	case exists && !req.Keep:
		return fmt.Errorf("%s cluster %q already exists; delete it (%s) or keep and reuse it with KEEP_CLUSTER=1", provider, req.Name, deleteCommand)
	case exists:
		return req.Step("Reusing kept "+provider+" cluster "+req.Name, reuse)
	}
	if err := create(); err != nil {
		return fmt.Errorf("creating %s cluster %s: %w", provider, req.Name, err)
	}
	return nil
}

// Handle is a cluster a provider made (or found) for a suite.
type Handle struct {
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string
	// CertManagerNamespace is cert-manager's cluster resource namespace, "" without cert-manager.
	CertManagerNamespace string
	// Reused says the cluster existed before this run (KEEP_CLUSTER=1, or an existing one).
	Reused bool
	// OperatorValues are chart values every release on this cluster needs so that its pods
	// run the operator under test (e.g. the image an existing cluster can pull); nil when the
	// chart's defaults already do.
	OperatorValues map[string]any
	// ServiceNetworkFromHost says this machine reaches the cluster's Service and pod addresses
	// itself (local: they are on its loopback and bridge). Where it does not (kind, existing),
	// tools run here must reach pods through the API server (port-forward): dialing a cluster
	// address from here would leave the machine by its default route.
	ServiceNetworkFromHost bool
	// Backend does what only the provider can.
	Backend Backend
}

// ContainerAction is done to a running container from outside Kubernetes, the way a node
// failure or an operator's kill -9 would.
type ContainerAction string

// The container actions.
const (
	// Freeze stops every process of the container: it neither runs nor handles signals.
	Freeze ContainerAction = "freeze"
	// Resume lets a frozen container run again.
	Resume ContainerAction = "resume"
	// Kill ends every process of the container at once (SIGKILL), frozen or not; no handler runs.
	Kill ContainerAction = "kill"
)

// Backend is what only the provider knows how to do on a cluster it runs.
type Backend interface {
	// ExportLogs copies every log the provider keeps (control plane, nodes, pods, processes
	// outside the cluster) into dir.
	ExportLogs(ctx context.Context, dir string) error
	// DialService opens a TCP connection to a Service's ClusterIP:port the way the API server
	// does, or says why this provider cannot.
	DialService(ctx context.Context, clusterIP string, port int32) (net.Conn, error)
	// DialPod opens a TCP connection to port of a running pod the way the API server would
	// reach it, or says why this provider cannot.
	DialPod(ctx context.Context, pod *corev1.Pod, port int32) (net.Conn, error)
	// Container does action to a container of a running pod, or says why it cannot.
	Container(ctx context.Context, pod *corev1.Pod, container string, action ContainerAction) error
	// NodeStats is the kubelet Summary API (GET /stats/summary) of node, as the provider
	// reaches that node's kubelet, or says why it cannot.
	NodeStats(ctx context.Context, node string) (*statsv1alpha1.Summary, error)
	// Destroy deletes what the provider made for the suite and checks nothing is left.
	Destroy(ctx context.Context) error
}

// StartFunc creates (or reuses, or connects to) the cluster a request asks for.
type StartFunc func(ctx context.Context, req Request) (*Handle, error)

// DefaultProvider runs when neither --provider nor GAUNTLET_PROVIDER names another.
const DefaultProvider = "local"

// DefaultName names the cluster of gauntlet-cluster (make cluster-up) when none is given.
const DefaultName = "gauntlet"

// Provider is what a provider registers under its name: how it gives a suite its cluster, what
// it does at the command line, and what a caller must know of it without naming it.
type Provider struct {
	// Start gives a suite its cluster.
	Start StartFunc
	// Clusters serves gauntlet-cluster (make cluster-up, cluster-down, …).
	Clusters Clusters
	// OperatorCoverage says Start honours Request.CoverDir: the operator's processes write
	// their coverage counters on this host.
	OperatorCoverage bool
	// KeepsPodLogs says the cluster's exported logs hold every container run of every pod it
	// ran, deleted pods' included; without it the suite records the logs it needs as they are
	// written (a kubelet deletes a pod's logs with the pod).
	KeepsPodLogs bool
	// RunsImages says Start honours Request.Images: the cluster runs images this run builds
	// (local maps them to their binaries, kind builds and loads them). A cluster that pulls
	// prebuilt images only (existing) does not.
	RunsImages bool
	// HostPreparation, when set, lists the workspace's scripts (a path below the workspace,
	// then its arguments) that prepare this host for the provider's clusters of the Kubernetes
	// version in K8S_VERSION, beyond the control-plane binaries every provider's run builds.
	HostPreparation func() [][]string
	// Footprint is what one suite's cluster takes from the host (make e2e's default number of
	// suites at once, and its capacity check).
	Footprint Footprint
}

// Footprint is what one suite's cluster of a provider takes from the host the suites run on.
// The figures are estimates from what a suite runs, rounded up (docs/suites.md says how to
// measure one).
type Footprint struct {
	// SuitesAtOnce is how many suites may run at once on a host with cores CPU cores, before
	// the figures below limit them; nil: one at a time.
	SuitesAtOnce func(cores int) int
	// SharedCluster says every suite runs on the one cluster, so they cannot run at once.
	SharedCluster bool
	// Memory in bytes, FileHandles of the system's table (fs.file-max), InotifyInstances and
	// InotifyWatches of the user's (fs.inotify.max_user_instances, max_user_watches).
	Memory, FileHandles, InotifyInstances, InotifyWatches float64
}

// GiB is a gibibyte, for Footprint.Memory.
const GiB = 1 << 30

// Clusters is what a provider does for a person at the command line, on clusters that outlive
// the command. Each method says what it did on out, or returns why it could not.
type Clusters interface {
	// Up creates the cluster req names and says how to use it; a provider that creates no
	// cluster checks the one it would run on.
	Up(ctx context.Context, req UpRequest) error
	// Down deletes the cluster and checks that nothing of it is left.
	Down(ctx context.Context, name string, out io.Writer) error
	// ExportLogs copies every log the provider keeps of the cluster into dir.
	ExportLogs(ctx context.Context, name, dir string) error
	// List names the provider's clusters on this host.
	List() ([]string, error)
	// LoadImages copies Docker images of this host into the cluster's nodes.
	LoadImages(ctx context.Context, name string, images []string, out io.Writer) error
}

// UpRequest is what `gauntlet-cluster up` asks of a provider.
type UpRequest struct {
	// Name of the cluster.
	Name string
	// ConfigFile is the provider's own cluster configuration; "" derives it.
	ConfigFile string
	// CertManager asks for cert-manager's controllers and cainjector.
	CertManager bool
	// WithoutNode starts the control plane only (local).
	WithoutNode bool
	// RetainOnFailure keeps what a failed creation made, for debugging (local).
	RetainOnFailure bool
	// Out receives the steps and how to use the cluster.
	Out io.Writer
}

// Create creates the cluster of p, an e2e-framework provider, from req.ConfigFile when one is
// given, and returns its kubeconfig's path.
func (req UpRequest) Create(ctx context.Context, p support.E2EClusterProvider) (string, error) {
	if req.ConfigFile != "" {
		return p.CreateWithConfig(ctx, req.ConfigFile)
	}
	return p.Create(ctx)
}

var (
	mu        sync.Mutex
	providers = map[string]Provider{}
)

// Register makes a provider available by name; a second registration of a name panics.
func Register(name string, p Provider) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := providers[name]; dup {
		panic("cluster provider " + name + " registered twice")
	}
	providers[name] = p
}

// Lookup returns the provider registered under name, or an error naming the known ones.
func Lookup(name string) (Provider, error) {
	mu.Lock()
	defer mu.Unlock()
	if p, ok := providers[name]; ok {
		return p, nil
	}
	if len(providers) == 0 {
		return Provider{}, fmt.Errorf("unknown provider %q: no provider is linked in (import github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers)", name)
	}
	return Provider{}, fmt.Errorf("unknown provider %q (want one of %s)", name, strings.Join(names(func(Provider) bool { return true }), ", "))
}

// Names lists the registered providers.
func Names() []string { return NamesWith(func(Provider) bool { return true }) }

// NamesWith lists the registered providers that have what has asks for.
func NamesWith(has func(Provider) bool) []string {
	mu.Lock()
	defer mu.Unlock()
	return names(has)
}

func names(has func(Provider) bool) []string {
	var names []string
	for n, p := range providers {
		if has(p) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}
