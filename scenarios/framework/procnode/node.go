// Package procnode is the process node of gauntlet's local cluster: a kubelet stand-in that
// registers a Node, runs each pod's containers as host processes (image → binary map,
// volumes in a private mount namespace, a network namespace per pod), reports pod status,
// serves `kubectl logs`, and plays kube-proxy for a loopback Service range. See CONTRACT.md
// for the daemon's flags and what it guarantees.
package procnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// NetworkMode chooses how pods are networked.
type NetworkMode string

const (
	// NetworkAuto picks NetworkNetns when running as root, else NetworkHost.
	NetworkAuto NetworkMode = "auto"
	// NetworkNetns gives each pod a network namespace on a bridge (root only).
	NetworkNetns NetworkMode = "netns"
	// NetworkHost runs pods on the host network with loopback pod IPs and no mount
	// namespaces; EndpointSlices cannot be published for such pods.
	NetworkHost NetworkMode = "host"
)

// Config is a process node's configuration; the daemon's flags map onto it one to one.
type Config struct {
	// RESTConfig reaches the apiserver as a cluster admin.
	RESTConfig *rest.Config
	// NodeName names the Node and its Lease.
	NodeName string
	// StateDir holds volumes, namespaces, logs and the kubelet certificate.
	StateDir string
	// ImagesFile is the JSON image → binary map (re-read on every container start).
	ImagesFile string
	// ServiceCIDR is the loopback Service range whose ClusterIPs the node serves.
	ServiceCIDR *net.IPNet
	// PodCIDR is the pod network; its first host address goes to the node's bridge.
	PodCIDR *net.IPNet
	// KubeletPort is the HTTPS port of the kubelet API (logs).
	KubeletPort int
	// APIServerHostForPods and APIServerPortForPods become KUBERNETES_SERVICE_HOST/PORT.
	// The port defaults to the RESTConfig's.
	APIServerHostForPods string
	APIServerPortForPods int
	// Network chooses the pod network (default NetworkAuto).
	Network NetworkMode
	// BridgeName overrides the bridge's derived name.
	BridgeName string
	// BindUnscheduledAfter binds pods no scheduler has looked at after this long (0: never).
	BindUnscheduledAfter time.Duration
	// KubeletClientCA, when set, makes the kubelet API require client certificates.
	KubeletClientCA string
	// ReadyFile is written once the node is Ready and serving.
	ReadyFile string
	// CrashBackoffInitial and CrashBackoffMax are the restart back-off bounds (10 s, 5 min).
	CrashBackoffInitial, CrashBackoffMax time.Duration
	// Executable is re-executed as each container's init; it must call RunPodInit when
	// IsPodInit (default: this process's executable).
	Executable string
	// CoverDir, when set, is every container's GOCOVERDIR (a runtime default, overridden by
	// the container's own env): coverage-instrumented binaries write their counters there.
	CoverDir string
}

// node is a running process node: the shared dependencies of its parts.
type node struct {
	cfg            Config
	client         kubernetes.Interface
	objects        *clusterObjects
	network        podNetwork
	images         imageMap
	mounts         *mountpoints
	recorder       record.EventRecorder
	broadcaster    record.EventBroadcaster
	podLister      corelisters.PodLister
	api            apiEndpoint
	isolate        bool
	nodeIP         string
	bootID         string
	kubeletVersion string

	mu      sync.Mutex
	workers map[string]*podWorker
	wg      sync.WaitGroup
}

// Run runs the node until ctx ends, then stops every pod and removes everything it made
// on the host (processes, mounts, network namespaces, veths, the bridge, listeners, the
// pods' state); logs stay in StateDir/logs.
func Run(ctx context.Context, cfg Config) (err error) {
	if err := cfg.complete(); err != nil {
		return err
	}
	log := klog.FromContext(ctx).WithValues("node", cfg.NodeName)
	n := &node{
		cfg:     cfg,
		images:  imageMap{file: cfg.ImagesFile},
		nodeIP:  "127.0.0.1",
		bootID:  string(uuid.NewUUID()),
		workers: map[string]*podWorker{},
	}
	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}()
	step := func(name string, fn func() error) error {
		start := time.Now()
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		log.V(1).Info("step done", "step", name, "took", time.Since(start).Round(time.Millisecond))
		return nil
	}

	if err := step("preparing state dir", n.prepareStateDir); err != nil {
		return err
	}
	cleanups = append(cleanups, n.removePodState)
	if err := step("connecting to the apiserver", n.connect); err != nil {
		return err
	}
	cleanups = append(cleanups, func() { n.broadcaster.Shutdown() })
	if err := step("setting up the pod network", func() error {
		nw, err := n.setUpNetwork()
		if err != nil {
			return err
		}
		n.network = nw
		cleanups = append(cleanups, func() {
			if err := nw.close(); err != nil {
				log.Error(err, "removing pod network")
			}
		})
		return nil
	}); err != nil {
		return err
	}
	if err := step("starting the apiserver forwarder for pods", func() error {
		fwd, err := n.startAPIForwarder()
		cleanups = append(cleanups, fwd.close)
		return err
	}); err != nil {
		return err
	}
	if err := step("serving the kubelet API", func() error {
		srv, err := n.startKubeletAPI()
		if err != nil {
			return err
		}
		cleanups = append(cleanups, func() { _ = srv.Close() })
		return nil
	}); err != nil {
		return err
	}

	informerCtx, stopInformers := context.WithCancel(context.Background())
	cleanups = append(cleanups, stopInformers)
	var proxy *serviceProxy
	if err := step("starting informers", func() error {
		var err error
		proxy, err = n.startInformers(informerCtx)
		return err
	}); err != nil {
		return err
	}
	cleanups = append(cleanups, proxy.close)
	go proxy.run(informerCtx.Done())

	if err := step("registering the Node", func() error { return n.registerNode(ctx) }); err != nil {
		return err
	}
	cleanups = append(cleanups, func() {
		// The apiserver may already be gone when a cluster is torn down; don't hang on it.
		c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := n.postNodeStatus(c, false); err != nil {
			log.V(1).Info("could not mark the Node NotReady", "err", err)
		}
	})
	cleanups = append(cleanups, n.stopPods)
	heartbeatCtx, stopHeartbeat := context.WithCancel(context.Background())
	cleanups = append(cleanups, stopHeartbeat)
	n.heartbeat(heartbeatCtx)

	if cfg.ReadyFile != "" {
		if err := os.WriteFile(cfg.ReadyFile, []byte(cfg.NodeName+"\n"), 0o600); err != nil {
			return fmt.Errorf("writing ready file %s: %w", cfg.ReadyFile, err)
		}
		cleanups = append(cleanups, func() { _ = os.Remove(cfg.ReadyFile) })
	}
	log.Info("process node ready", "network", n.describeNetwork(), "kubeletPort", cfg.KubeletPort,
		"apiserverForPods", fmt.Sprintf("%s:%d", n.api.host, n.api.port))
	<-ctx.Done()
	log.Info("process node stopping")
	return nil
}

func (c *Config) complete() error {
	var errs []error
	if c.RESTConfig == nil {
		errs = append(errs, errors.New("a REST config (--kubeconfig) is required"))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("--node-name is required"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("--state-dir is required"))
	}
	if c.ImagesFile == "" {
		errs = append(errs, errors.New("--images is required"))
	}
	if c.ServiceCIDR == nil {
		errs = append(errs, errors.New("--service-cidr is required"))
	}
	if c.KubeletPort <= 0 || c.KubeletPort > 65535 {
		errs = append(errs, fmt.Errorf("--kubelet-port %d is not a valid port", c.KubeletPort))
	}
	if c.Network == "" {
		c.Network = NetworkAuto
	}
	if c.Network == NetworkAuto {
		c.Network = NetworkHost
		if os.Geteuid() == 0 {
			c.Network = NetworkNetns
		}
	}
	switch c.Network {
	case NetworkNetns:
		if os.Geteuid() != 0 {
			errs = append(errs, errors.New("--network=netns needs root (network and mount namespaces)"))
		}
		if c.PodCIDR == nil {
			errs = append(errs, errors.New("--pod-cidr is required with --network=netns"))
		}
		if c.APIServerHostForPods == "" {
			errs = append(errs, errors.New("--apiserver-host-for-pods is required with --network=netns"))
		}
	case NetworkHost:
	default:
		errs = append(errs, fmt.Errorf("--network %q: want auto, netns or host", c.Network))
	}
	if c.BridgeName == "" {
		c.BridgeName = bridgeNameFor(c.NodeName)
	}
	if len(c.BridgeName) > 15 {
		errs = append(errs, fmt.Errorf("--bridge-name %q is longer than 15 bytes", c.BridgeName))
	}
	if c.CrashBackoffInitial <= 0 {
		c.CrashBackoffInitial = 10 * time.Second
	}
	if c.CrashBackoffMax <= 0 {
		c.CrashBackoffMax = 5 * time.Minute
	}
	if c.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			errs = append(errs, fmt.Errorf("finding this executable (re-executed as pod init): %w", err))
		}
		c.Executable = exe
	}
	if c.StateDir != "" {
		abs, err := filepath.Abs(c.StateDir)
		if err != nil {
			errs = append(errs, fmt.Errorf("--state-dir %s: %w", c.StateDir, err))
		}
		c.StateDir = abs
	}
	return errors.Join(errs...)
}

// prepareStateDir creates the state dir and clears pod state a killed daemon left behind.
func (n *node) prepareStateDir() error {
	if err := os.MkdirAll(n.cfg.StateDir, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", n.cfg.StateDir, err)
	}
	if err := os.WriteFile(filepath.Join(n.cfg.StateDir, "node.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing pid file: %w", err)
	}
	n.removePodState()
	if n.cfg.Network != NetworkNetns {
		return nil // no mount namespaces, so no mount targets (and maybe no root for the registry)
	}
	mounts, err := newMountpoints(hostMountpointRegistry, n.cfg.NodeName)
	if err != nil {
		return err
	}
	// A killed node's mount targets have no live holder any more.
	if err := mounts.removeOrphans(); err != nil {
		return err
	}
	n.mounts = mounts
	return nil
}

func (n *node) removePodState() {
	_ = os.RemoveAll(filepath.Join(n.cfg.StateDir, "pods"))
	_ = os.Remove(filepath.Join(n.cfg.StateDir, "node.pid"))
}

func (n *node) connect() error {
	cfg := rest.CopyConfig(n.cfg.RESTConfig)
	cfg.UserAgent = "gauntlet-node/" + n.cfg.NodeName
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a client for %s: %w", cfg.Host, err)
	}
	n.client = client
	broadcaster := record.NewBroadcaster()
	n.broadcaster = broadcaster
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	n.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: n.cfg.NodeName})
	return nil
}

func (n *node) setUpNetwork() (podNetwork, error) {
	if n.cfg.Network == NetworkHost {
		n.isolate = false
		klog.Warning("PROCESS NODE WITHOUT ROOT (--network=host): pods share the host network with pod IP 127.0.0.1, " +
			"so two pods listening on one port collide; the apiserver refuses loopback addresses in EndpointSlices, " +
			"so NO EndpointSlices are published for these pods (the Service proxy selects pods itself); " +
			"no mount namespaces: volumes are NOT at their mountPath (env GAUNTLET_VOLUME_<NAME> points at each), " +
			"so the ServiceAccount token is not at /var/run/secrets/kubernetes.io/serviceaccount and in-cluster config fails, " +
			"and the files an image map entry says an image carries are NOT at their paths (a container reads the host's); " +
			"Service ports below 1024 need CAP_NET_BIND_SERVICE")
		return hostNetwork{}, nil
	}
	n.isolate = true
	return newBridgeNetwork(n.cfg.NodeName, n.cfg.BridgeName, n.cfg.PodCIDR, n.cfg.StateDir)
}

func (n *node) describeNetwork() string {
	if n.cfg.Network == NetworkHost {
		return "host (loopback pod IPs)"
	}
	return fmt.Sprintf("netns on bridge %s %s", n.cfg.BridgeName, n.cfg.PodCIDR)
}

// startAPIForwarder works out KUBERNETES_SERVICE_HOST/PORT and, with pod namespaces,
// forwards the bridge address to the apiserver.
func (n *node) startAPIForwarder() (*apiForwarder, error) {
	u, err := url.Parse(n.cfg.RESTConfig.Host)
	if err != nil || u.Host == "" {
		u, err = url.Parse("https://" + n.cfg.RESTConfig.Host)
		if err != nil {
			return nil, fmt.Errorf("parsing apiserver address %q: %w", n.cfg.RESTConfig.Host, err)
		}
	}
	host, portStr := u.Hostname(), u.Port()
	if portStr == "" {
		portStr = "443"
	}
	port, _ := strconv.Atoi(portStr)
	n.api = apiEndpoint{host: host, port: port}
	if n.cfg.Network == NetworkHost {
		return nil, nil
	}
	if n.cfg.APIServerPortForPods != 0 {
		port = n.cfg.APIServerPortForPods
	}
	n.api = apiEndpoint{host: n.cfg.APIServerHostForPods, port: port}
	target := net.JoinHostPort(host, portStr)
	return startAPIForwarder(net.JoinHostPort(n.cfg.APIServerHostForPods, strconv.Itoa(port)), target)
}

// startInformers watches this node's pods (running them), Secrets and ConfigMaps (volume
// updates), and Services with their endpoints (the Service proxy).
func (n *node) startInformers(ctx context.Context) (*serviceProxy, error) {
	all := informers.NewSharedInformerFactory(n.client, 10*time.Minute)
	mine := informers.NewSharedInformerFactoryWithOptions(n.client, 10*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", n.cfg.NodeName).String()
		}))
	podInformer := mine.Core().V1().Pods()
	secrets := all.Core().V1().Secrets()
	configMaps := all.Core().V1().ConfigMaps()
	services := all.Core().V1().Services()
	n.podLister = podInformer.Lister()
	n.objects = &clusterObjects{client: n.client, secrets: secrets.Lister(), configMaps: configMaps.Lister()}

	var proxy *serviceProxy
	if n.cfg.Network == NetworkHost {
		proxy = newServiceProxy(n.cfg.ServiceCIDR, services.Lister(), nil, podInformer.Lister())
	} else {
		slices := all.Discovery().V1().EndpointSlices()
		proxy = newServiceProxy(n.cfg.ServiceCIDR, services.Lister(), slices.Lister(), nil)
		if _, err := slices.Informer().AddEventHandler(anyChange(proxy.changed)); err != nil {
			return nil, err
		}
	}
	if _, err := services.Informer().AddEventHandler(anyChange(proxy.changed)); err != nil {
		return nil, err
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.podChanged(obj); proxy.changed() },
		UpdateFunc: func(_, obj any) { n.podChanged(obj); proxy.changed() },
		DeleteFunc: func(obj any) { n.podDeleted(obj); proxy.changed() },
	}); err != nil {
		return nil, err
	}
	for _, inf := range []cache.SharedIndexInformer{secrets.Informer(), configMaps.Informer()} {
		if _, err := inf.AddEventHandler(anyChange(n.kickAll)); err != nil {
			return nil, err
		}
	}
	if n.cfg.BindUnscheduledAfter > 0 {
		if err := n.startBinder(ctx); err != nil {
			return nil, err
		}
	}
	all.Start(ctx.Done())
	mine.Start(ctx.Done())
	for typ, ok := range all.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("syncing %v informer", typ)
		}
	}
	for typ, ok := range mine.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("syncing %v informer", typ)
		}
	}
	return proxy, nil
}

func anyChange(fn func()) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { fn() },
		UpdateFunc: func(any, any) { fn() },
		DeleteFunc: func(any) { fn() },
	}
}

func (n *node) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key := string(pod.UID)
	n.mu.Lock()
	defer n.mu.Unlock()
	if w, ok := n.workers[key]; ok {
		w.setPod(pod)
		return
	}
	if n.workers == nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return
	}
	w := newPodWorker(n, pod)
	n.workers[key] = w
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		w.run()
		n.mu.Lock()
		if n.workers != nil {
			delete(n.workers, key)
		}
		n.mu.Unlock()
	}()
}

func (n *node) podDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if w, ok := n.workers[string(pod.UID)]; ok {
		w.setPod(nil)
	}
}

// kickAll wakes every pod so Secret and ConfigMap changes reach volumes (and containers
// waiting for a missing reference start) without waiting for a resync.
func (n *node) kickAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range n.workers {
		w.wake()
	}
}

// stopPods stops every pod (grace capped) and waits for their sandboxes to be removed.
func (n *node) stopPods() {
	n.mu.Lock()
	workers := n.workers
	n.workers = nil
	n.mu.Unlock()
	for _, w := range workers {
		w.shutdown()
	}
	n.wg.Wait()
}
