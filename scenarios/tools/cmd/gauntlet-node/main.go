// Command gauntlet-node is the process node of gauntlet's local cluster: it registers a
// Node with a real kube-apiserver and runs the pods bound to it as host processes. The
// local cluster provider starts it; see scenarios/framework/procnode/CONTRACT.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
)

func main() {
	if procnode.IsPodInit() {
		procnode.RunPodInit()
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "gauntlet-node: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("gauntlet-node", flag.ContinueOnError)
	klog.InitFlags(fs)
	var (
		kubeconfig  = fs.String("kubeconfig", "", "admin kubeconfig of the cluster (required)")
		cfg         procnode.Config
		serviceCIDR = fs.String("service-cidr", "", "loopback Service range whose ClusterIPs this node serves, e.g. 127.0.100.0/24 (required)")
		podCIDR     = fs.String("pod-cidr", "", "pod network, e.g. 10.244.0.0/24; the bridge takes its first host address (required with --network=netns)")
		network     = fs.String("network", string(procnode.NetworkAuto), "pod network: auto (netns when root, else host), netns or host")
	)
	fs.StringVar(&cfg.NodeName, "node-name", "", "name of the Node and its Lease (required)")
	fs.StringVar(&cfg.StateDir, "state-dir", "", "directory for volumes, namespaces, logs and the kubelet certificate (required)")
	fs.StringVar(&cfg.ImagesFile, "images", "", "JSON file mapping image repositories (no tag) to binary paths (required)")
	fs.IntVar(&cfg.KubeletPort, "kubelet-port", 0, "HTTPS port of the kubelet API the apiserver proxies `kubectl logs` to (required)")
	fs.StringVar(&cfg.APIServerHostForPods, "apiserver-host-for-pods", "", "KUBERNETES_SERVICE_HOST for pods: a host-side address reachable from pod namespaces that the apiserver certificate names (required with --network=netns)")
	fs.IntVar(&cfg.APIServerPortForPods, "apiserver-port-for-pods", 0, "KUBERNETES_SERVICE_PORT for pods (default: the kubeconfig server's port)")
	fs.StringVar(&cfg.BridgeName, "bridge-name", "", "name of the pod bridge (default derived from the node name)")
	fs.DurationVar(&cfg.BindUnscheduledAfter, "bind-unscheduled-after", 5*time.Second, "bind pods no scheduler looked at after this long (0 disables)")
	fs.StringVar(&cfg.KubeletClientCA, "kubelet-client-ca", "", "PEM CA that kubelet API clients must present certificates from (default: no client auth)")
	fs.StringVar(&cfg.ReadyFile, "ready-file", "", "file written once the node is Ready and serving")
	fs.DurationVar(&cfg.CrashBackoffInitial, "crash-backoff-initial", 10*time.Second, "first restart back-off of a crashing container")
	fs.DurationVar(&cfg.CrashBackoffMax, "crash-backoff-max", 5*time.Minute, "longest restart back-off")
	fs.StringVar(&cfg.CoverDir, "cover-dir", "", "GOCOVERDIR for every container: where coverage-instrumented binaries write their counters (default: unset)")

	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *kubeconfig == "" {
		return fmt.Errorf("--kubeconfig is required")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig %s: %w", *kubeconfig, err)
	}
	cfg.RESTConfig = rc
	cfg.Network = procnode.NetworkMode(*network)
	if *serviceCIDR != "" {
		if _, cfg.ServiceCIDR, err = net.ParseCIDR(*serviceCIDR); err != nil {
			return fmt.Errorf("--service-cidr: %w", err)
		}
	}
	if *podCIDR != "" {
		if _, cfg.PodCIDR, err = net.ParseCIDR(*podCIDR); err != nil {
			return fmt.Errorf("--pod-cidr: %w", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	defer klog.Flush()
	return procnode.Run(ctx, cfg)
}
