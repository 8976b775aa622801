package procnode

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	mathrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// The integration tests share one control plane and two process nodes (one in-process, one
// the real daemon binary). Names and ranges are picked per run (see pickRunRanges) so that
// concurrent runs of this package, and local clusters, never share a bridge, a Service
// range or a mount path.
const (
	testNamespace = "procnode-it"
	testImage     = "example.com/gauntlet/podserver"
)

var (
	testNodeName, daemonNodeName       string
	testServiceCIDR                    string
	testPodCIDR, testPodGateway        string
	daemonPodCIDR, daemonPodGateway    string
	mountRoot                          string
	configMountPath, optionalMountPath string
	scratchMountPath                   string
)

// pickRunRanges chooses a run id whose pod ranges are on no interface and whose Service
// range has no listener, and derives every per-run name from it.
func pickRunRanges() error {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("listing addresses: %w", err)
	}
	listeners, err := readTCPListeners()
	if err != nil {
		return err
	}
	for _, id := range mathrand.Perm(250) { //nolint:gosec // G404: spreads parallel runs over address ranges; nothing secret
		id++
		pod := fmt.Sprintf("10.246.%d.0/24", id)
		daemon := fmt.Sprintf("10.247.%d.0/24", id)
		svc := fmt.Sprintf("127.1.%d.0/24", id)
		if rangeInUse(addrs, listeners, pod, daemon, svc) {
			continue
		}
		testNodeName = fmt.Sprintf("procnode-it-%d", id)
		daemonNodeName = fmt.Sprintf("procnode-it-%d-daemon", id)
		testServiceCIDR = svc
		testPodCIDR, testPodGateway = pod, fmt.Sprintf("10.246.%d.1", id)
		daemonPodCIDR, daemonPodGateway = daemon, fmt.Sprintf("10.247.%d.1", id)
		// Mount paths that do not exist on the host: the node creates them for the bind
		// mounts and must remove them again.
		mountRoot = fmt.Sprintf("/etc/procnode-it-%d", id)
		configMountPath = mountRoot + "/config"
		optionalMountPath = mountRoot + "/optional"
		scratchMountPath = fmt.Sprintf("/procnode-it-%d-scratch", id)
		return nil
	}
	return fmt.Errorf("no free pod and Service ranges for the integration test")
}

func rangeInUse(addrs []netlink.Addr, listeners []*net.TCPAddr, cidrs ...string) bool {
	for _, c := range cidrs {
		_, n, _ := net.ParseCIDR(c)
		for _, a := range addrs {
			if n.Contains(a.IP) {
				return true
			}
		}
		for _, l := range listeners {
			if n.Contains(l.IP) {
				return true
			}
		}
	}
	return false
}

func TestMain(m *testing.M) {
	// The node re-executes this test binary as each container's init.
	if IsPodInit() {
		RunPodInit()
	}
	code := m.Run()
	if shared.c != nil {
		shared.c.stop()
	}
	os.Exit(code)
}

// testCluster is a real etcd + kube-apiserver (envtest), a kube-controller-manager running
// the controllers pods depend on (ServiceAccounts, kube-root-ca.crt, EndpointSlices,
// Deployments, ReplicaSets), and a process node running in this test process. There is no
// scheduler: pods name their node, or the node's binder places them.
type testCluster struct {
	env        *envtest.Environment
	cfg        *rest.Config
	client     kubernetes.Interface
	kcm        *exec.Cmd
	tmp        string
	stateDir   string
	imagesFile string
	podserver  string
	caFile     string
	kubeletURL string
	stopNode   context.CancelFunc
	nodeDone   chan error
}

var shared struct {
	once sync.Once
	c    *testCluster
	err  error
}

// cluster starts the shared cluster on first use. A missing binary or a missing root
// fails the test: integration coverage is never silently skipped.
func cluster(t *testing.T) *testCluster {
	t.Helper()
	require.Zero(t, os.Geteuid(), "the process node integration test needs root (network and mount namespaces per pod)")
	shared.once.Do(func() { shared.c, shared.err = startTestCluster() })
	require.NoError(t, shared.err)
	return shared.c
}

func startTestCluster() (_ *testCluster, err error) {
	assets, err := workspace.ControlPlaneAssets("etcd", "kube-apiserver", "kube-controller-manager")
	if err != nil {
		return nil, err
	}
	if err := pickRunRanges(); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "procnode-it-")
	if err != nil {
		return nil, err
	}
	c := &testCluster{tmp: tmp, stateDir: filepath.Join(tmp, "node"), imagesFile: filepath.Join(tmp, "images.json")}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()

	// The apiserver's serving cert must name the bridge address pods dial; envtest keeps
	// a CertDir it finds populated, so provide one.
	certDir := filepath.Join(tmp, "apiserver-certs")
	caPEM, err := writeAPIServerCerts(certDir, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(testPodGateway), net.ParseIP(daemonPodGateway)})
	if err != nil {
		return nil, fmt.Errorf("writing apiserver certificates: %w", err)
	}
	c.env = &envtest.Environment{BinaryAssetsDirectory: assets}
	api := c.env.ControlPlane.GetAPIServer()
	api.CertDir = certDir
	api.CA = caPEM
	api.Configure().
		Set("service-cluster-ip-range", testServiceCIDR).
		Set("endpoint-reconciler-type", "none").
		Set("advertise-address", "127.0.0.1").
		// As the local provider does: the apiserver authenticates to kubelets with a client
		// certificate the node verifies (--kubelet-client-ca).
		Set("kubelet-client-certificate", filepath.Join(certDir, "kubelet-client.crt")).
		Set("kubelet-client-key", filepath.Join(certDir, "kubelet-client.key")).
		// envtest turns the ServiceAccount admission plugin off; a real cluster (and the
		// local provider) has it, and it is what injects the projected token volume.
		Set("disable-admission-plugins", "")
	if c.cfg, err = c.env.Start(); err != nil {
		return nil, fmt.Errorf("starting etcd + kube-apiserver from %s: %w", assets, err)
	}
	if c.client, err = kubernetes.NewForConfig(c.cfg); err != nil {
		return nil, err
	}
	c.caFile = filepath.Join(certDir, "ca.crt")
	if err := c.startControllerManager(assets, c.caFile); err != nil {
		return nil, err
	}

	c.podserver = filepath.Join(tmp, "podserver")
	build := exec.Command("go", "build", "-o", c.podserver, "./testdata/podserver") //nolint:gosec // G204: go build of this package's testdata into the test's temp dir
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building testdata/podserver: %v\n%s", err, out)
	}
	images, _ := json.Marshal(map[string]string{testImage: c.podserver})
	if err := os.WriteFile(c.imagesFile, images, 0o600); err != nil {
		return nil, err
	}

	ctx := context.Background()
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", testNamespace, err)
	}
	what := "kube-controller-manager to create the default ServiceAccount and kube-root-ca.crt in " + testNamespace
	if err := poll.Until(ctx, what, 60*time.Second, func(ctx context.Context) (bool, string, error) {
		_, errSA := c.client.CoreV1().ServiceAccounts(testNamespace).Get(ctx, "default", metav1.GetOptions{})
		_, errCM := c.client.CoreV1().ConfigMaps(testNamespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return errSA == nil && errCM == nil, fmt.Sprintf("ServiceAccount: %v; ConfigMap: %v", errSA, errCM), nil
	}); err != nil {
		return nil, err
	}
	if err := c.startNode(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *testCluster) startControllerManager(assets, caFile string) error {
	kubeconfig := filepath.Join(c.tmp, "admin.kubeconfig")
	if err := writeKubeconfig(c.cfg, kubeconfig); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(c.tmp, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	c.kcm = exec.Command(filepath.Join(assets, "kube-controller-manager"), //nolint:gosec // G204: the control-plane binary from the assets dir
		"--kubeconfig="+kubeconfig,
		"--controllers=serviceaccount,root-ca-cert-publisher,endpointslice,deployment,replicaset",
		"--leader-elect=false",
		"--secure-port=0",
		"--root-ca-file="+caFile,
	)
	c.kcm.Stdout, c.kcm.Stderr = logFile, logFile
	if err := c.kcm.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	return nil
}

func (c *testCluster) startNode() error {
	_, svcCIDR, _ := net.ParseCIDR(testServiceCIDR)
	_, podCIDR, _ := net.ParseCIDR(testPodCIDR)
	port, err := freePort()
	if err != nil {
		return err
	}
	c.kubeletURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	c.stopNode = cancel
	c.nodeDone = make(chan error, 1)
	ready := filepath.Join(c.tmp, "node.ready")
	go func() {
		c.nodeDone <- Run(ctx, Config{
			RESTConfig:           c.cfg,
			NodeName:             testNodeName,
			StateDir:             c.stateDir,
			ImagesFile:           c.imagesFile,
			ServiceCIDR:          svcCIDR,
			PodCIDR:              podCIDR,
			KubeletPort:          port,
			APIServerHostForPods: testPodGateway,
			Network:              NetworkNetns,
			ReadyFile:            ready,
			KubeletClientCA:      c.caFile,
			BindUnscheduledAfter: time.Second,
			CrashBackoffInitial:  time.Second,
			CrashBackoffMax:      2 * time.Second,
		})
	}()
	return poll.Until(context.Background(), "the process node's ready file "+ready, 30*time.Second, func(context.Context) (bool, string, error) {
		select {
		case err := <-c.nodeDone:
			return false, "", fmt.Errorf("process node exited: %v", err)
		default:
		}
		_, err := os.Stat(ready)
		return err == nil, "not written yet", nil
	})
}

// stopNodeAndWait stops the process node and returns its error.
func (c *testCluster) stopNodeAndWait() error {
	if c.stopNode == nil {
		return nil
	}
	c.stopNode()
	c.stopNode = nil
	select {
	case err := <-c.nodeDone:
		return err
	case <-time.After(60 * time.Second):
		return fmt.Errorf("process node did not stop within 60s")
	}
}

func (c *testCluster) stop() {
	if c == nil {
		return
	}
	if err := c.stopNodeAndWait(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping process node:", err)
	}
	if c.kcm != nil && c.kcm.Process != nil {
		_ = c.kcm.Process.Kill()
		_ = c.kcm.Wait()
	}
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
	}
	if os.Getenv("PROCNODE_KEEP_TMP") == "" {
		_ = os.RemoveAll(c.tmp)
	} else {
		fmt.Fprintln(os.Stderr, "kept", c.tmp)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}

// writeAPIServerCerts writes a CA, a serving cert for the given names and the
// ServiceAccount signing key pair into dir with the file names envtest uses.
func writeAPIServerCerts(dir string, dnsNames []string, ips []net.IP) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "procnode-it-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	servingKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	servingTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, servingTmpl, caCert, &servingKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	// The apiserver's client certificate towards kubelets (--kubelet-client-certificate).
	kubeletClientKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	kubeletClientTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	kubeletClientDER, err := x509.CreateCertificate(rand.Reader, kubeletClientTmpl, caCert, &kubeletClientKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		"ca.crt":             caPEM,
		"apiserver.crt":      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servingDER}),
		"apiserver.key":      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(servingKey)}),
		"sa-signer.crt":      pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
		"sa-signer.key":      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		"kubelet-client.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kubeletClientDER}),
		"kubelet-client.key": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(kubeletClientKey)}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}
