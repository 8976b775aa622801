package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// envtestServiceCIDR is the API server's Service range: loopback, so a
// Service's ClusterIP is an address of this host and the operator, listening
// on all interfaces, answers there.
const envtestServiceCIDR = "127.0.250.0/24"

// EnvtestOptions configure StartEnvtest.
type EnvtestOptions struct {
	// Values are chart values set over the bench's own.
	Values map[string]any
	// WorkDir receives the operator's log (operator.log); it must exist. It is
	// the run's output directory, the one users attach to bug reports, so no
	// key material goes there: the admin kubeconfig and the operator's serving
	// certificate and key live in a private temporary directory that Close
	// removes.
	WorkDir string
	// Pprof serves net/http/pprof from the operator (--pprof-bind-address).
	Pprof bool
	// Progress receives the setup steps.
	Progress io.Writer
}

// StartEnvtest starts etcd and kube-apiserver (controller-runtime's envtest),
// creates the chart's objects rendered for automatic mode — everything but
// the Deployment — and runs the operator binary as a subprocess with the
// Deployment's arguments. Without kube-proxy the API server dials the
// webhook Service at ClusterIP:port, so the Service and webhook ports are set
// to the operator's port (the one deviation from the rendered chart). The
// operator authenticates as the admin, not as its ServiceAccount: this
// testbed measures latency, the local provider proves RBAC.
func StartEnvtest(ctx context.Context, opts EnvtestOptions) (_ *Testbed, err error) {
	logf := logfTo(opts.Progress)
	t := &Testbed{Provider: "envtest"}
	defer func() {
		if err != nil {
			err = joinClose(ctx, t, err)
		}
	}()
	if opts.WorkDir == "" {
		return nil, errors.New("envtest testbed: no work directory")
	}

	start := time.Now()
	operator, err := workspace.BuildOperator(ctx, OperatorVersion, false)
	if err != nil {
		return nil, err
	}
	logf("built dynamo-operator %s (%.1fs)", OperatorVersion, time.Since(start).Seconds())

	assets, err := workspace.ControlPlaneAssets("etcd", "kube-apiserver")
	if err != nil {
		return nil, err
	}
	start = time.Now()
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", envtestServiceCIDR)
	if t.REST, err = env.Start(); err != nil {
		return nil, fmt.Errorf("starting etcd + kube-apiserver from %s: %w", assets, err)
	}
	t.onClose(func(context.Context) error {
		if err := env.Stop(); err != nil {
			return fmt.Errorf("stopping envtest control plane: %w", err)
		}
		return nil
	})
	t.REST.QPS, t.REST.Burst = -1, 0
	logf("control plane %s ready (%.1fs)", t.REST.Host, time.Since(start).Seconds())

	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	webhookPort, metricsPort, probePort, pprofPort := ports[0], ports[1], ports[2], ports[3]
	t.Release = chart.Release{Name: chart.DefaultReleaseName, Namespace: chart.DefaultNamespace, Mode: chart.Automatic, Values: benchValues(opts.Values)}
	args, err := applyChart(ctx, t, webhookPort)
	if err != nil {
		return nil, err
	}

	// Closed after the operator has stopped (closers run in reverse).
	secrets, err := os.MkdirTemp("", "gauntlet-bench-envtest-")
	if err != nil {
		return nil, fmt.Errorf("creating a private directory for the kubeconfig and serving certificate: %w", err)
	}
	t.secretsDir = secrets
	t.onClose(func(context.Context) error {
		if err := os.RemoveAll(secrets); err != nil {
			return fmt.Errorf("removing %s (admin kubeconfig, serving key): %w", secrets, err)
		}
		return nil
	})
	kubeconfig := filepath.Join(secrets, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", kubeconfig, err)
	}
	certDir := filepath.Join(secrets, "serving-certs")
	overrides := map[string]string{
		"--webhook-port":              strconv.Itoa(webhookPort),
		"--webhook-cert-dir":          certDir,
		"--metrics-bind-address":      "127.0.0.1:" + strconv.Itoa(metricsPort),
		"--health-probe-bind-address": "127.0.0.1:" + strconv.Itoa(probePort),
		"--kubeconfig":                kubeconfig,
	}
	if opts.Pprof {
		overrides["--pprof-bind-address"] = "127.0.0.1:" + strconv.Itoa(pprofPort)
		t.OperatorPprofURL = "http://127.0.0.1:" + strconv.Itoa(pprofPort) + "/debug/pprof/"
	}
	logPath := filepath.Join(opts.WorkDir, "operator.log")
	stop, err := startOperator(operator, withFlags(args, overrides), logPath)
	if err != nil {
		return nil, err
	}
	t.onClose(stop)
	logf("operator started (log: %s)", logPath)

	start = time.Now()
	dyn, err := dynamic.NewForConfig(t.REST)
	if err != nil {
		return nil, fmt.Errorf("building a dynamic client for %s: %w", t.REST.Host, err)
	}
	if err := release.WaitAdmission(ctx, dyn, &t.Release, time.Minute); err != nil {
		return nil, fmt.Errorf("%w\noperator log %s:\n%s", err, logPath, tailFile(logPath, 20))
	}
	logf("webhooks of %s answer through the API server (%.1fs)", &t.Release, time.Since(start).Seconds())

	t.WebhookURL = "https://127.0.0.1:" + strconv.Itoa(webhookPort)
	t.OperatorMetricsURL = "https://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"
	if err := t.finish(ctx, logf); err != nil {
		return nil, err
	}
	return t, nil
}

// applyChart renders the chart for t.Release, creates its namespace and every
// object except the Deployment (Service and webhook ports set to
// webhookPort), and returns the operator container's arguments.
func applyChart(ctx context.Context, t *Testbed, webhookPort int) ([]string, error) {
	vals, err := t.Release.ChartValues()
	if err != nil {
		return nil, err
	}
	objs, err := chart.Render(t.Release.Name, t.Release.Namespace, vals)
	if err != nil {
		return nil, err
	}
	c, err := client.New(t.REST, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("building a client for %s: %w", t.REST.Host, err)
	}
	kube, err := kubernetes.NewForConfig(t.REST)
	if err != nil {
		return nil, fmt.Errorf("building a Kubernetes client for %s: %w", t.REST.Host, err)
	}
	if err := release.EnsureNamespace(ctx, kube, t.Release.Namespace); err != nil {
		return nil, err
	}
	var args []string
	// CRDs first: the API server must serve a kind before anything refers to it.
	ordered := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			ordered = append(ordered, o)
		}
	}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			ordered = append(ordered, o)
		}
	}
	for _, o := range ordered {
		switch o.GetKind() {
		case "Deployment":
			if args, err = operatorArgs(o); err != nil {
				return nil, err
			}
			continue
		case "Service":
			if o.GetName() == t.Release.ServiceName() {
				if err := setServicePort(o, webhookPort); err != nil {
					return nil, err
				}
			}
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			if err := setWebhookPorts(o, webhookPort); err != nil {
				return nil, err
			}
		case "CustomResourceDefinition":
			if _, found, _ := unstructured.NestedMap(o.Object, "spec", "conversion", "webhook", "clientConfig", "service"); found {
				if err := unstructured.SetNestedField(o.Object, int64(webhookPort), "spec", "conversion", "webhook", "clientConfig", "service", "port"); err != nil {
					return nil, fmt.Errorf("CustomResourceDefinition %s: %w", o.GetName(), err)
				}
			}
		}
		if err := c.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("creating %s %s: %w", o.GetKind(), objectName(o), err)
		}
	}
	if args == nil {
		return nil, fmt.Errorf("the chart rendered no Deployment for %s", &t.Release)
	}
	return args, nil
}

func objectName(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

func operatorArgs(d *unstructured.Unstructured) ([]string, error) {
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) == 0 {
		return nil, fmt.Errorf("no containers in Deployment %s (%v)", objectName(d), err)
	}
	c, _ := containers[0].(map[string]any)
	args, _, err := unstructured.NestedStringSlice(c, "args")
	if err != nil {
		return nil, fmt.Errorf("container args of Deployment %s: %w", objectName(d), err)
	}
	return args, nil
}

func setServicePort(svc *unstructured.Unstructured, port int) error {
	ports, _, err := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if err != nil || len(ports) != 1 {
		return fmt.Errorf("want exactly one port in Service %s, got %d (%v)", objectName(svc), len(ports), err)
	}
	p := ports[0].(map[string]any)
	p["port"], p["targetPort"] = int64(port), int64(port)
	return unstructured.SetNestedSlice(svc.Object, ports, "spec", "ports")
}

func setWebhookPorts(cfg *unstructured.Unstructured, port int) error {
	hooks, _, err := unstructured.NestedSlice(cfg.Object, "webhooks")
	if err != nil {
		return fmt.Errorf("%s %s: %w", cfg.GetKind(), cfg.GetName(), err)
	}
	for _, h := range hooks {
		if err := unstructured.SetNestedField(h.(map[string]any), int64(port), "clientConfig", "service", "port"); err != nil {
			return fmt.Errorf("%s %s: %w", cfg.GetKind(), cfg.GetName(), err)
		}
	}
	return unstructured.SetNestedSlice(cfg.Object, hooks, "webhooks")
}

// withFlags replaces the values of the named flags in args ("--name=value")
// and appends those args lack.
func withFlags(args []string, flags map[string]string) []string {
	out := make([]string, 0, len(args)+len(flags))
	done := map[string]bool{}
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if v, ok := flags[name]; ok {
			out = append(out, name+"="+v)
			done[name] = true
			continue
		}
		out = append(out, a)
	}
	for name, v := range flags {
		if !done[name] {
			out = append(out, name+"="+v)
		}
	}
	return out
}

// startOperator runs the operator with the pod identity the Deployment's
// downward API would give it; stop sends SIGTERM, as the kubelet does, and
// waits for a clean exit.
func startOperator(binary string, args []string, logPath string) (func(context.Context) error, error) {
	logFile, err := os.Create(logPath) //nolint:gosec // G304: the log path in the test bed's own directory
	if err != nil {
		return nil, fmt.Errorf("creating operator log %s: %w", logPath, err)
	}
	cmd := exec.Command(binary, args...) //nolint:gosec // G204: the operator binary just built, with the chart's args
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+chart.DefaultNamespace, "POD_NAME=dynamo-operator-bench")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close() // the start error is the one to report
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); _ = logFile.Close() }() // the log is only read back, by tailFile
	return func(context.Context) error {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("stopping operator (pid %d): %w", cmd.Process.Pid, err)
		}
		select {
		case err := <-done:
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				return fmt.Errorf("operator (pid %d): %w", cmd.Process.Pid, err)
			}
			if err != nil {
				return fmt.Errorf("operator (pid %d) exited with %v; log %s:\n%s", cmd.Process.Pid, err, logPath, tailFile(logPath, 20))
			}
			return nil
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			return fmt.Errorf("operator (pid %d) did not exit within 30s of SIGTERM; killed", cmd.Process.Pid)
		}
	}, nil
}

// freePorts reserves n distinct loopback ports by listening on port 0; they
// are released right away, so another process could take one in between —
// unlikely enough for a test bed, and the operator fails loudly if it happens.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close() // releasing the port is all that matters
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserving a local port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path) //nolint:gosec // G304: the operator log startOperator wrote
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
