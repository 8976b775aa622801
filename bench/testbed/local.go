package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/local"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// LocalOptions configure StartLocal.
type LocalOptions struct {
	// ClusterName names the local cluster (default "gauntlet-bench"). The
	// cluster is created for the run and deleted by Close.
	ClusterName string
	// Values are chart values set over the bench's own (helm --set style,
	// see ParseValues).
	Values map[string]any
	// Keep leaves the cluster running after Close, for inspection
	// (`make cluster-down CLUSTER=<name>` removes it).
	Keep bool
	// Progress receives the cluster's and the install's steps.
	Progress io.Writer
}

// StartLocal creates a local cluster (real control plane, process node),
// `helm install`s charts/dynamo-operator in automatic mode with the operator
// built from this workspace, deploys the floor webhook (InstallFloor), and
// waits until both answer. Direct attacks go to the operator pod's address,
// so they measure the webhook server without the node's Service forwarding;
// dry-run creates take the real path (API server → Service → TLS → pod).
func StartLocal(ctx context.Context, opts LocalOptions) (*Testbed, error) {
	tbs, err := startLocal(ctx, opts, []localSide{{values: benchValues(opts.Values)}})
	if err != nil {
		return nil, err
	}
	return tbs[0], nil
}

// Side is what one side of an A/B testbed runs.
type Side struct {
	// Name says what the side runs, in progress lines and errors, e.g.
	// "BASE_REF=main (3f2c1a9)".
	Name string
	// Root is the checkout whose operator and chart the side installs; empty
	// means this workspace.
	Root string
	// Values are chart values set over the bench's own, on this side only
	// (say, an injected latency that the comparison must catch).
	Values map[string]any
}

// Pair is an A/B testbed: two releases of the operator in one cluster, each
// serving its own namespace, or two releases of a target in a cluster each
// (Separate), measured against each other in one run.
type Pair struct {
	A, B *Testbed
	// Separate says each side runs in a cluster of its own (StartTargetAB): the
	// control and floor ladders then run on each side, since each cluster has its own.
	Separate bool
}

// Close tears the cluster down (side A holds it), or both clusters when separate.
func (p *Pair) Close(ctx context.Context) error {
	var errs []error
	for _, t := range []*Testbed{p.B, p.A} {
		if t != nil && (p.Separate || t == p.A) {
			errs = append(errs, t.Close(ctx))
		}
	}
	return errors.Join(errs...)
}

// baseOperatorImage is the image repository of side A's operator on an A/B
// testbed; side B runs the chart's default image repository.
func baseOperatorImage() string { return chart.OperatorImageRepository() + "-base" }

// StartLocalAB creates one local cluster and installs two releases of the
// chart in automatic mode: side A (release bench-a, the operator and chart of
// a.Root) and side B (release bench-b, of b.Root), each with its own webhook
// configurations selecting only its own namespace (SideLabel), plus the floor
// webhook. Release A installs the CRDs, release B does not (one release per
// cluster may). Both releases serve at the same time; the benchmark decides
// which one a request reaches by its namespace (dry-run creates) or by the
// pod it dials (direct attacks).
func StartLocalAB(ctx context.Context, opts LocalOptions, a, b Side) (*Pair, error) {
	tbs, err := startLocal(ctx, opts, []localSide{
		{side: "a", name: a.Name, root: a.Root, values: sideValues("a", chart.MergeValues(map[string]any{
			"image": map[string]any{"repository": baseOperatorImage()},
		}, a.Values))},
		{side: "b", name: b.Name, root: b.Root, values: sideValues("b", chart.MergeValues(map[string]any{
			"crds": map[string]any{"install": false},
		}, b.Values))},
	})
	if err != nil {
		return nil, err
	}
	return &Pair{A: tbs[0], B: tbs[1]}, nil
}

// localSide is one release startLocal installs.
type localSide struct {
	// side is "a" or "b" on an A/B testbed, empty on a single one.
	side string
	// name says what the side runs (Side.Name).
	name string
	// root is the checkout to build the operator and load the chart from
	// (empty: this workspace).
	root string
	// values are the release's chart values.
	values map[string]any
}

// image is the repository of the side's operator image: its values'
// image.repository, or the chart's default.
func (s localSide) image() string {
	if img, ok := s.values["image"].(map[string]any); ok {
		if repo, ok := img["repository"].(string); ok && repo != "" {
			return repo
		}
	}
	return chart.OperatorImageRepository()
}

// release is the side's Helm release: the chart's default name and namespace
// on a single testbed, bench-<side> in bench-<side>-system on an A/B one.
func (s localSide) release() chart.Release {
	r := chart.Release{Mode: chart.Automatic, Values: s.values}
	if s.side != "" {
		r.Name, r.Namespace = "bench-"+s.side, "bench-"+s.side+"-system"
	}
	return r
}

// startLocal builds what the sides run, creates the cluster, installs every
// side's release and the floor, and returns one Testbed per side. The first
// Testbed's Close tears the cluster down; the others share it.
func startLocal(ctx context.Context, opts LocalOptions, sides []localSide) (_ []*Testbed, err error) {
	logf := logfTo(opts.Progress)
	name := opts.ClusterName
	if name == "" {
		name = "gauntlet-bench"
	}
	first := &Testbed{Provider: "local"}
	defer func() {
		if err != nil {
			err = joinClose(ctx, first, err)
		}
	}()

	images := map[string]procnode.Image{}
	for _, s := range sides {
		start := time.Now()
		operator, err := buildOperator(ctx, s)
		if err != nil {
			return nil, err
		}
		images[s.image()] = procnode.Image{Binary: operator}
		logf("built dynamo-operator %s%s (%.1fs)", OperatorVersion, s.describe(), time.Since(start).Seconds())
	}
	floor, err := BuildFloor(ctx)
	if err != nil {
		return nil, err
	}
	images[FloorImage] = procnode.Image{Binary: floor}

	kubeconfig, err := startLocalCluster(ctx, first, name, images, opts, logf)
	if err != nil {
		return nil, err
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	// The benchmark's own requests must not queue behind client-go's default
	// 5 QPS limiter in the clients used for setup and scraping.
	restConfig.QPS, restConfig.Burst = -1, 0
	kube, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("building a Kubernetes client from %s: %w", kubeconfig, err)
	}
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("building a dynamic client from %s: %w", kubeconfig, err)
	}

	var out []*Testbed
	for i, s := range sides {
		t := first
		if i > 0 {
			t = &Testbed{Provider: "local"}
		}
		t.REST, t.side = restConfig, s.side
		if err := installSide(ctx, t, kubeconfig, kube, s, logf); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := InstallFloor(ctx, kube, dyn, restConfig, logf); err != nil {
		return nil, err
	}
	for _, t := range out {
		t.FloorNamespace, t.FloorPatchingNamespace, t.FloorDirectNamespace = FloorNamespace, FloorPatchingNamespace, FloorDirectNamespace
		if err := t.finish(ctx, logf); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// buildOperator builds the side's operator: this workspace's, or that of the
// checkout at s.root into a directory of its own.
func buildOperator(ctx context.Context, s localSide) (string, error) {
	if s.root == "" {
		return workspace.BuildOperator(ctx, OperatorVersion, false)
	}
	dir := filepath.Join(workspace.BinDir(), "dynamo-operator-"+OperatorVersion+"-"+s.side)
	built, err := workspace.Build(ctx, dir, workspace.BuildOptions{OperatorVersion: OperatorVersion, Root: s.root}, workspace.OperatorPackage)
	if err != nil {
		return "", fmt.Errorf("the operator of side %s (%s) does not build: %w", strings.ToUpper(s.side), s.name, err)
	}
	return built[workspace.OperatorPackage], nil
}

// describe is " for side A, <name>" on an A/B testbed, empty otherwise.
func (s localSide) describe() string {
	if s.side == "" {
		return ""
	}
	return fmt.Sprintf(" for side %s, %s", strings.ToUpper(s.side), s.name)
}

// installSide installs the side's release (its chart from s.root when set),
// waits until it is ready, and points t at its operator pod.
func installSide(ctx context.Context, t *Testbed, kubeconfig string, kube kubernetes.Interface, s localSide, logf func(string, ...any)) error {
	instOpts := []release.InstallerOption{release.WithLogf(logf)}
	if s.root != "" {
		dir := filepath.Join(s.root, chart.Path)
		ch, err := loader.Load(dir)
		if err != nil {
			return fmt.Errorf("loading the chart%s from %s: %w", s.describe(), dir, err)
		}
		instOpts = append(instOpts, release.WithChart(ch))
	}
	inst, err := release.NewInstaller(kubeconfig, instOpts...)
	if err != nil {
		return err
	}
	t.Release = s.release()
	if s.side != "" {
		// The release's webhooks select only namespaces labelled with its side, and the
		// installer's readiness check creates its probes in the release namespace.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.Release.Namespace, Labels: map[string]string{SideLabel: s.side}}}
		if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Namespace %s for side %s: %w", ns.Name, strings.ToUpper(s.side), err)
		}
	}
	if err := inst.Install(ctx, &t.Release); err != nil {
		return err
	}
	if err := inst.WaitReady(ctx, &t.Release, 3*time.Minute); err != nil {
		return err
	}
	pods, err := release.OperatorPods(ctx, kube, &t.Release)
	if err != nil {
		return err
	}
	pod, err := readyPod(pods, "operator")
	if err != nil {
		return fmt.Errorf("%s: %w", &t.Release, err)
	}
	webhookPort, metricsPort, err := containerPorts(pod)
	if err != nil {
		return err
	}
	t.WebhookURL = "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(webhookPort))
	t.OperatorMetricsURL = "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(metricsPort)) + "/metrics"
	logf("operator pod %s/%s serves webhooks at %s", pod.Namespace, pod.Name, t.WebhookURL)
	return nil
}

// readyPod picks a Ready pod with an address among pods of what ("operator");
// the bench attacks one replica directly.
func readyPod(pods []corev1.Pod, what string) (*corev1.Pod, error) {
	var seen []string
	for i := range pods {
		p := &pods[i]
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				return p, nil
			}
		}
		seen = append(seen, release.PodState(p))
	}
	return nil, fmt.Errorf("no Ready %s pod with an IP: %s", what, strings.Join(seen, "; "))
}

// containerPorts reads the operator container's webhook-server and metrics
// ports, the names the chart gives them.
func containerPorts(pod *corev1.Pod) (webhook, metrics int, err error) {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			switch p.Name {
			case "webhook-server":
				webhook = int(p.ContainerPort)
			case "metrics":
				metrics = int(p.ContainerPort)
			}
		}
	}
	if webhook == 0 || metrics == 0 {
		return 0, 0, fmt.Errorf("pod %s/%s: no container port named webhook-server and metrics", pod.Namespace, pod.Name)
	}
	return webhook, metrics, nil
}

func progressOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func joinClose(ctx context.Context, t *Testbed, err error) error {
	if cerr := t.Close(context.WithoutCancel(ctx)); cerr != nil {
		return fmt.Errorf("%w (and tearing down: %v)", err, cerr)
	}
	return err
}

// startLocalCluster creates local cluster name running images and returns its kubeconfig; tb's
// close deletes it (or keeps it, opts.Keep, saying how to delete it) and fails when anything of
// it is left behind.
func startLocalCluster(ctx context.Context, tb *Testbed, name string, images map[string]procnode.Image, opts LocalOptions, logf func(string, ...any)) (string, error) {
	p := local.NewProvider()
	p.WithName(name)
	p.WithOpts(local.WithProgress(progressOrDiscard(opts.Progress)), local.WithImages(images))
	tb.onClose(func(ctx context.Context) error {
		if opts.Keep {
			logf("keeping local cluster %q (delete it with `make cluster-down CLUSTER=%s`)", name, name)
			return nil
		}
		cfg, cfgErr := p.Config()
		if err := p.Destroy(ctx); err != nil {
			return fmt.Errorf("deleting local cluster %q: %w", name, err)
		}
		if cfgErr == nil {
			if left := local.Leftovers(cfg); len(left) > 0 {
				return fmt.Errorf("deleting local cluster %q left behind:\n  %s", name, strings.Join(left, "\n  "))
			}
		}
		return nil
	})
	kubeconfig, err := p.Create(ctx)
	if err != nil {
		return "", fmt.Errorf("creating local cluster %q: %w", name, err)
	}
	return kubeconfig, nil
}
