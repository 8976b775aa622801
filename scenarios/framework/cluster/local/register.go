package local

import (
	"context"
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// ProviderName is the name suites choose this provider by (--provider=local).
const ProviderName = "local"

func init() {
	cluster.Register(ProviderName, cluster.Provider{Start: start, Clusters: commandLine{}, OperatorCoverage: true, RunsImages: true, KeepsPodLogs: true, Footprint: footprint})
}

// footprint: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the process node,
// up to six operator processes, cert-manager, the test binary, and — as every suite starts —
// go test's link of the test binary; inotify: kube-apiserver's watched certificate files and
// each operator's certwatcher. A local suite mostly waits (on Leases, certificates, rollouts),
// so the CPU has room for one more suite than it has cores; more would turn waits into
// contention that the timing scenarios (P5's takeover times, H4's latency) feel.
var footprint = cluster.Footprint{
	SuitesAtOnce: func(cores int) int { return cores + 1 },
	Memory:       1.5 * cluster.GiB, FileHandles: 2048, InotifyInstances: 16, InotifyWatches: 512,
}

// start gives a suite its local cluster: it builds the operator, then creates the cluster or
// reuses the kept one.
func start(ctx context.Context, req cluster.Request) (*cluster.Handle, error) {
	var operator string
	if err := req.Step("Building dynamo-operator "+req.OperatorVersion, func() (err error) {
		operator, err = workspace.BuildOperator(ctx, req.OperatorVersion, req.CoverDir != "")
		return err
	}); err != nil {
		return nil, err
	}
	p := NewProvider()
	p.WithName(req.Name)
	p.WithVersion(req.KubernetesVersion)
	images := NodeImages(req.Images)
	if _, ok := images[chart.OperatorImageRepository()]; !ok { // an image of the request's wins
		images[chart.OperatorImageRepository()] = operatorImage(operator)
	}
	p.WithOpts(WithProgress(req.Progress), WithImages(images))
	if req.CoverDir != "" {
		p.WithOpts(WithCoverDir(req.CoverDir))
	}
	if req.CertManager {
		p.WithOpts(WithCertManager())
	}
	names, err := Clusters()
	if err != nil {
		return nil, err
	}
	reused := slices.Contains(names, req.Name)
	err = req.CreateOrReuse(ProviderName, "make cluster-down CLUSTER="+req.Name, reused,
		func() error { _, err := p.Create(ctx); return err },
		func() error { return checkReusable(ctx, p, req, operator) })
	if err != nil {
		return nil, err
	}
	cfg, err := p.Config()
	if err != nil {
		return nil, err
	}
	h := &cluster.Handle{Kubeconfig: p.GetKubeconfig(), Reused: reused, ServiceNetworkFromHost: true, Backend: backend{p}}
	if cfg.CertManager.Enabled {
		h.CertManagerNamespace = cfg.CertManager.Namespace
	}
	return h, nil
}

// checkReusable makes sure a kept cluster can serve this run: it is up, has cert-manager if
// needed, and runs the operator binary just built.
func checkReusable(ctx context.Context, p *Provider, req cluster.Request, operator string) error {
	cfg, err := p.Config()
	if err != nil {
		return err
	}
	var problems []string
	if req.CertManager && !cfg.CertManager.Enabled {
		problems = append(problems, "it has no cert-manager, which this suite needs")
	}
	repo := chart.OperatorImageRepository()
	if got, want := cfg.Images[repo], operatorImage(operator); !reflect.DeepEqual(got, want) {
		problems = append(problems, fmt.Sprintf("it maps image %s to %+v, this run built %+v (another --operator-version?)", repo, got, want))
	}
	for _, image := range slices.Sorted(maps.Keys(req.Images)) {
		if got, want := cfg.Images[procnode.ImageRepository(image)], nodeImage(req.Images[image]); !reflect.DeepEqual(got, want) {
			problems = append(problems, fmt.Sprintf("it maps image %s to %+v, this run built %+v", image, got, want))
		}
	}
	if cfg.KubernetesVersion != req.KubernetesVersion {
		problems = append(problems, fmt.Sprintf("it runs Kubernetes %s, this run asks for %s", cfg.KubernetesVersion, req.KubernetesVersion))
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

// nodeImage is what the node runs for img: its programs by their paths in the image, and the
// files it carries, which the node mounts there. Empty maps are left out, as the config a kept
// cluster is compared by keeps them.
func nodeImage(img cluster.Image) procnode.Image {
	orNil := func(m map[string]string) map[string]string {
		if len(m) == 0 {
			return nil
		}
		return m
	}
	return procnode.Image{Binary: img.Binary, Entrypoint: img.Entrypoint, Programs: orNil(img.Programs), Files: orNil(img.Files), Env: orNil(img.Env)}
}

// backend does what only the local provider can: its pods are host processes and its Service
// addresses are on this host's loopback.
type backend struct{ p *Provider }

func (b backend) ExportLogs(ctx context.Context, dir string) error { return b.p.ExportLogs(ctx, dir) }

// DialService dials the ClusterIP directly: the node agent listens on ClusterIP:port on this
// host's loopback range, exactly where the API server connects.
func (b backend) DialService(ctx context.Context, clusterIP string, port int32) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort(clusterIP, strconv.Itoa(int(port))))
}

// DialPod dials the pod IP directly: pods are on a bridge of this host.
func (b backend) DialPod(ctx context.Context, pod *corev1.Pod, port int32) (net.Conn, error) {
	if pod.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s/%s has no IP", pod.Namespace, pod.Name)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port))))
}

// NodeStats asks the process node's kubelet API itself (Provider.NodeStats).
func (b backend) NodeStats(ctx context.Context, node string) (*statsv1alpha1.Summary, error) {
	return b.p.NodeStats(ctx, node)
}

// processContainerPrefix is how the process node reports a container: a host process leading
// its own process group, containerID process://<pid> (scenarios/framework/procnode/CONTRACT.md).
const processContainerPrefix = "process://"

// Container signals the container's process group: SIGSTOP, SIGCONT or SIGKILL.
func (b backend) Container(_ context.Context, pod *corev1.Pod, container string, action cluster.ContainerAction) error {
	signals := map[cluster.ContainerAction]syscall.Signal{cluster.Freeze: syscall.SIGSTOP, cluster.Resume: syscall.SIGCONT, cluster.Kill: syscall.SIGKILL}
	sig, ok := signals[action]
	if !ok {
		return fmt.Errorf("unknown container action %q", action)
	}
	pid, err := hostPID(pod, container)
	if err != nil {
		return err
	}
	if err := syscall.Kill(-pid, sig); err != nil && (action != cluster.Kill || err != syscall.ESRCH) {
		return fmt.Errorf("%s container %s of pod %s/%s (%s to process group %d): %w", action, container, pod.Namespace, pod.Name, sig, pid, err)
	}
	return nil
}

// hostPID is the host process of a pod's container.
func hostPID(pod *corev1.Pod, container string) (int, error) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		id, ok := strings.CutPrefix(cs.ContainerID, processContainerPrefix)
		pid, err := strconv.Atoi(id)
		if !ok || err != nil || pid <= 1 {
			return 0, fmt.Errorf("pod %s/%s container %s: containerID %q does not name a process (%s<pid>)", pod.Namespace, pod.Name, container, cs.ContainerID, processContainerPrefix)
		}
		return pid, nil
	}
	return 0, fmt.Errorf("pod %s/%s has no status for container %s (not started yet?)", pod.Namespace, pod.Name, container)
}

// Destroy deletes the cluster, then fails when anything of it is left on the host.
func (b backend) Destroy(ctx context.Context) error {
	cfg, cfgErr := b.p.Config()
	if err := b.p.Destroy(ctx); err != nil {
		return err
	}
	if cfgErr == nil {
		if left := Leftovers(cfg); len(left) > 0 {
			return fmt.Errorf("deleting cluster %s left behind:\n  %s", cfg.Name, strings.Join(left, "\n  "))
		}
	}
	return nil
}

// NodeImages are the node's images for images by reference (cluster.Request.Images): keyed
// by repository, as the node looks them up, each as nodeImage makes it.
func NodeImages(images map[string]cluster.Image) map[string]procnode.Image {
	out := make(map[string]procnode.Image, len(images))
	for ref, img := range images {
		out[procnode.ImageRepository(ref)] = nodeImage(img)
	}
	return out
}
