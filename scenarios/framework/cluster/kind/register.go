package kind

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// ProviderName is the name suites choose this provider by (--provider=kind).
const ProviderName = "kind"

// NodeImageEnv names a node image to use instead of building the offline one, e.g.
// kindest/node:v1.37.0 on a machine with a registry.
const NodeImageEnv = "KIND_NODE_IMAGE"

func init() {
	cluster.Register(ProviderName, cluster.Provider{Start: start, Clusters: commandLine{}, RunsImages: true, HostPreparation: hostPreparation, Footprint: footprint})
}

// footprint: a node container (systemd, containerd, kubelet, the control plane, kube-proxy,
// CoreDNS) besides the test binary; inotify: systemd, containerd, kubelet and cAdvisor watch
// files and cgroups, for which kind's own known issues ask 512 instances for many nodes. Each
// cluster keeps a kubelet, containerd and a whole control plane busy even when idle: one
// suite per two cores.
var footprint = cluster.Footprint{
	SuitesAtOnce: func(cores int) int { return cores / 2 },
	Memory:       3 * cluster.GiB, FileHandles: 8192, InotifyInstances: 40, InotifyWatches: 8192,
}

// hostPreparation checks that the host runs privileged containers and builds the version's
// node image — unless KIND_NODE_IMAGE names one (a stock kindest/node image, pulled beforehand).
func hostPreparation() [][]string {
	scripts := [][]string{{"hack/kind-host.sh", "check"}}
	if os.Getenv(NodeImageEnv) == "" {
		scripts = append(scripts, []string{"hack/kind-node-image.sh"})
	}
	return scripts
}

// start gives a suite its kind cluster: it builds the operator image the chart's defaults
// name, then creates the cluster (loading the image) or reuses the kept one.
func start(ctx context.Context, req cluster.Request) (*cluster.Handle, error) {
	var operator string
	if err := req.Step("Building image of dynamo-operator "+req.OperatorVersion, func() (err error) {
		operator, err = BuildOperatorImage(ctx, req.OperatorVersion)
		return err
	}); err != nil {
		return nil, err
	}
	images := []string{operator}
	for _, ref := range slices.Sorted(maps.Keys(req.Images)) {
		img := req.Images[ref]
		if err := req.Step("Building image "+ref+" FROM scratch", func() error {
			return BuildScratchImage(ctx, ref, img)
		}); err != nil {
			return nil, err
		}
		images = append(images, ref)
	}
	p := NewProvider()
	p.WithName(req.Name)
	p.WithVersion(req.KubernetesVersion)
	p.WithOpts(WithProgress(req.Progress), WithImages(images...))
	if img := os.Getenv(NodeImageEnv); img != "" {
		p.WithOpts(WithNodeImage(img))
	}
	if req.CertManager {
		p.WithOpts(WithCertManager())
	}
	if err := dockerReachable(ctx); err != nil {
		return nil, err
	}
	exists, err := p.Exists()
	if err != nil {
		return nil, err
	}
	err = req.CreateOrReuse(ProviderName, "make cluster-down PROVIDER=kind CLUSTER="+req.Name, exists,
		func() error { _, err := p.Create(ctx); return err },
		func() error { return p.reuse(ctx, req, images) })
	if err != nil {
		return nil, err
	}
	h := &cluster.Handle{Kubeconfig: p.GetKubeconfig(), Reused: exists, Backend: backend{p}}
	if req.CertManager {
		h.CertManagerNamespace = CertManagerNamespace
	}
	return h, nil
}

// reuse checks that a kept cluster is healthy and has what this run needs, and loads the
// images just built into it.
func (p *Provider) reuse(ctx context.Context, req cluster.Request, images []string) error {
	if _, err := p.GenerateKubeconfig(); err != nil {
		return err
	}
	if err := p.WaitForControlPlane(ctx, nil); err != nil {
		return fmt.Errorf("kept kind cluster %q is not healthy: %w; delete it with `make cluster-down PROVIDER=kind CLUSTER=%s`", p.name, err, p.name)
	}
	if req.CertManager {
		kube, err := kubernetes.NewForConfig(p.KubernetesRestConfig())
		if err != nil {
			return err
		}
		_, err = kube.AppsV1().Deployments(CertManagerNamespace).Get(ctx, certmanager.InClusterName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("kept kind cluster %q has no cert-manager, which this suite needs; delete it with `make cluster-down PROVIDER=kind CLUSTER=%s`", p.name, p.name)
		}
		if err != nil {
			return err
		}
	}
	return p.LoadImages(ctx, images...)
}

// BuildOperatorImage builds dynamo-operator (version stamped in) into an image from
// operator/Dockerfile, tagged as the chart's defaults name it (dynamo-operator:<appVersion>),
// so that the suites install exactly what users get from the chart.
func BuildOperatorImage(ctx context.Context, version string) (string, error) {
	ch, err := chart.Load()
	if err != nil {
		return "", err
	}
	root, err := workspace.Root()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(workspace.BinDir(), "images", "dynamo-operator-"+version)
	if _, err := workspace.Build(ctx, dir, workspace.BuildOptions{OperatorVersion: version, Static: true}, workspace.OperatorPackage); err != nil {
		return "", err
	}
	ref := chart.OperatorImageRepository() + ":" + ch.Metadata.AppVersion
	return ref, BuildImage(ctx, ref, filepath.Join(root, "operator", "Dockerfile"), dir)
}

// backend does what only the kind provider can: reach the cluster network from inside a node,
// and act on containers through the nodes' containerd.
type backend struct{ p *Provider }

func (b backend) ExportLogs(ctx context.Context, dir string) error { return b.p.ExportLogs(ctx, dir) }

func (b backend) DialService(ctx context.Context, clusterIP string, port int32) (net.Conn, error) {
	return b.p.DialService(ctx, clusterIP, port)
}

// DialPod connects from the control-plane node, like DialService: pod IPs are routed there.
func (b backend) DialPod(ctx context.Context, pod *corev1.Pod, port int32) (net.Conn, error) {
	if pod.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s/%s has no IP", pod.Namespace, pod.Name)
	}
	return b.p.DialService(ctx, pod.Status.PodIP, port)
}

func (b backend) Container(ctx context.Context, pod *corev1.Pod, container string, action cluster.ContainerAction) error {
	return b.p.Container(ctx, pod, container, action)
}

// NodeStats goes through the API server's node proxy: it reaches the nodes' kubelets at
// their container addresses.
func (b backend) NodeStats(ctx context.Context, node string) (*statsv1alpha1.Summary, error) {
	cfg, err := b.p.restConfig() // fails after the cluster's deletion (a suite interrupted while a check still samples)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building a Kubernetes client for kind cluster %s: %w", b.p.name, err)
	}
	return cluster.NodeStatsThroughAPIServer(ctx, kube, node)
}

func (b backend) Destroy(ctx context.Context) error { return b.p.Destroy(ctx) }
