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
	// CoverDir, when set, asks for a coverage-instrumented operator whose processes write their
	// counters there when they exit (`make e2e COVER=1`). Only the local provider offers it.
	CoverDir string
	// Progress receives the provider's own step lines.
	Progress io.Writer
	// Step runs one named step of the suite's progress.
	Step func(title string, fn func() error) error
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
	// Destroy deletes what the provider made for the suite and checks nothing is left.
	Destroy(ctx context.Context) error
}

// StartFunc creates (or reuses, or connects to) the cluster a request asks for.
type StartFunc func(ctx context.Context, req Request) (*Handle, error)

var (
	mu        sync.Mutex
	providers = map[string]StartFunc{}
)

// Register makes a provider available by name; a second registration of a name panics.
func Register(name string, start StartFunc) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := providers[name]; dup {
		panic("cluster provider " + name + " registered twice")
	}
	providers[name] = start
}

// Lookup returns the provider registered under name, or an error naming the known ones.
func Lookup(name string) (StartFunc, error) {
	mu.Lock()
	defer mu.Unlock()
	if start, ok := providers[name]; ok {
		return start, nil
	}
	if len(providers) == 0 {
		return nil, fmt.Errorf("unknown provider %q: no provider is linked in (import github.com/gauntlet-dev/gauntlet/scenarios/cluster/providers)", name)
	}
	return nil, fmt.Errorf("unknown provider %q (want one of %s)", name, strings.Join(names(), ", "))
}

// Names lists the registered providers.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	return names()
}

func names() []string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
