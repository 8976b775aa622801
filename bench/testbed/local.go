package testbed

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gauntlet-dev/gauntlet/scenarios/cluster/local"
	"github.com/gauntlet-dev/gauntlet/scenarios/install"
	"github.com/gauntlet-dev/gauntlet/scenarios/workspace"
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
// built from this workspace, and waits until its webhooks answer. Direct
// attacks go to the operator pod's address, so they measure the webhook
// server without the node's Service forwarding; dry-run creates take the
// real path (API server → Service → TLS → pod).
func StartLocal(ctx context.Context, opts LocalOptions) (_ *Testbed, err error) {
	logf := logfTo(opts.Progress)
	name := opts.ClusterName
	if name == "" {
		name = "gauntlet-bench"
	}
	t := &Testbed{Provider: "local"}
	defer func() {
		if err != nil {
			err = joinClose(ctx, t, err)
		}
	}()

	start := time.Now()
	operator, err := workspace.BuildOperator(ctx, OperatorVersion, false)
	if err != nil {
		return nil, err
	}
	logf("built dynamo-operator %s (%.1fs)", OperatorVersion, time.Since(start).Seconds())

	p := local.NewProvider()
	p.WithName(name)
	p.WithOpts(local.WithProgress(progressOrDiscard(opts.Progress)), local.WithImages(map[string]string{local.OperatorImage: operator}))
	t.onClose(func(ctx context.Context) error {
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
		return nil, fmt.Errorf("creating local cluster %q: %w", name, err)
	}
	if t.REST, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	// The benchmark's own requests must not queue behind client-go's default
	// 5 QPS limiter in the clients used for setup and scraping.
	t.REST.QPS, t.REST.Burst = -1, 0

	inst, err := install.NewInstaller(kubeconfig, install.WithLogf(logf))
	if err != nil {
		return nil, err
	}
	t.Release = install.Release{Mode: install.Automatic, Values: benchValues(opts.Values)}
	if err := inst.Install(ctx, &t.Release); err != nil {
		return nil, err
	}
	if err := inst.WaitReady(ctx, &t.Release, 3*time.Minute); err != nil {
		return nil, err
	}

	kube, err := kubernetes.NewForConfig(t.REST)
	if err != nil {
		return nil, fmt.Errorf("building a Kubernetes client from %s: %w", kubeconfig, err)
	}
	pods, err := install.OperatorPods(ctx, kube, &t.Release)
	if err != nil {
		return nil, err
	}
	pod, err := readyPod(pods)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", &t.Release, err)
	}
	webhookPort, metricsPort, err := containerPorts(pod)
	if err != nil {
		return nil, err
	}
	t.WebhookURL = "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(webhookPort))
	t.OperatorMetricsURL = "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(metricsPort)) + "/metrics"
	logf("operator pod %s/%s serves webhooks at %s", pod.Namespace, pod.Name, t.WebhookURL)

	if err := t.finish(ctx, logf); err != nil {
		return nil, err
	}
	return t, nil
}

// readyPod picks a Ready operator pod with an address; the bench attacks one
// replica directly.
func readyPod(pods []corev1.Pod) (*corev1.Pod, error) {
	var seen []string
	for i := range pods {
		p := &pods[i]
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				return p, nil
			}
		}
		seen = append(seen, install.PodState(p))
	}
	return nil, fmt.Errorf("no Ready operator pod with an IP: %s", strings.Join(seen, "; "))
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
