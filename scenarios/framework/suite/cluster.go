package suite

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/podstats"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
)

// Cluster is the cluster under test as every scenario sees it, whatever made it (Cluster API's
// ClusterProxy): clients, the Helm installer, what runs on it, and how to get its logs.
// Scenarios get it with ClusterFrom and never learn which provider is behind it.
type Cluster struct {
	name       string
	provider   string
	kubeconfig string
	rest       *rest.Config
	kube       kubernetes.Interface
	dynamic    dynamic.Interface
	crds       apiextensionsclient.Interface
	installer  *release.Installer

	kubernetesVersion    string
	operatorVersion      string
	certManagerNamespace string
	serviceNetwork       bool
	backend              cluster.Backend
	ledger               *ledger
	mapping
}

// newCluster connects to the cluster kubeconfig points at.
func newCluster(name, provider, operatorVersion string, h *cluster.Handle, logf func(string, ...any)) (*Cluster, error) {
	cfg, err := release.RESTConfig(h.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	c := &Cluster{name: name, provider: provider, kubeconfig: h.Kubeconfig, rest: cfg, operatorVersion: operatorVersion,
		certManagerNamespace: h.CertManagerNamespace, serviceNetwork: h.ServiceNetworkFromHost, backend: h.Backend,
		ledger: newLedger()}
	// Every client made from this config (c.RESTConfig() included) records its writes.
	cfg.Wrap(c.ledger.wrap)
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("building a Kubernetes client for cluster %s: %w", name, err)
	}
	if c.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("building a dynamic client for cluster %s: %w", name, err)
	}
	if c.crds, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("building an apiextensions client for cluster %s: %w", name, err)
	}
	if c.installer, err = release.NewInstaller(h.Kubeconfig, release.WithLogf(logf), release.WithValues(h.OperatorValues)); err != nil {
		return nil, err
	}
	v, err := c.kube.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the Kubernetes version of cluster %s: %w", name, err)
	}
	c.kubernetesVersion = v.GitVersion
	return c, nil
}

// Name is the cluster's name.
func (c *Cluster) Name() string { return c.name }

// Provider is the name of the provider that made the cluster ("local", "kind"), for reports.
func (c *Cluster) Provider() string { return c.provider }

// KubeconfigPath is the admin kubeconfig file.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfig }

// RESTConfig is an admin REST config (a copy: callers may change it).
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.rest) }

// Kube is a typed admin client.
func (c *Cluster) Kube() kubernetes.Interface { return c.kube }

// Dynamic is an admin client for any resource, used for the Dynamo objects as users write them.
func (c *Cluster) Dynamic() dynamic.Interface { return c.dynamic }

// AdmittedInvalid tells the suite that the scenario's Dynamo object resource namespace/name
// (resource as in the API path, e.g. "dynamographdeployments") was admitted although invalid,
// on purpose: that is the symptom of the fault it injected. After the scenario, once its fix
// is in, validating the object again must deny it — instead of the usual check that every
// object the scenario wrote passes validation.
func (c *Cluster) AdmittedInvalid(resource, namespace, name string) {
	c.ledger.admittedInvalid(resource, namespace, name)
}

// CRDs is an admin client for CustomResourceDefinitions.
func (c *Cluster) CRDs() apiextensionsclient.Interface { return c.crds }

// Installer installs charts/dynamo-operator on this cluster.
func (c *Cluster) Installer() *release.Installer { return c.installer }

// KubernetesVersion is the API server's version, e.g. v1.37.0.
func (c *Cluster) KubernetesVersion() string { return c.kubernetesVersion }

// ResolvesWebhookServicePerRequest reports whether the API server of version v resolves a
// webhook's Service for every call (feature gate WebhookRoundTripLoadBalancing, beta and on by
// default since v1.37) rather than only when it dials a new connection: before, a deleted
// Service goes on being called over the connections the API server keeps open to its address.
func ResolvesWebhookServicePerRequest(v string) bool {
	parsed, err := version.ParseGeneric(v)
	return err != nil || parsed.AtLeast(version.MajorMinor(1, 37))
}

// OperatorVersion is the version stamped into the operator this cluster runs: what the
// mutating webhook writes into nvidia.com/dynamo-operator-origin-version.
func (c *Cluster) OperatorVersion() string { return c.operatorVersion }

// CertManagerNamespace is cert-manager's cluster resource namespace (where ClusterIssuers keep
// their Secrets); ok is false when the cluster has no cert-manager.
func (c *Cluster) CertManagerNamespace() (ns string, ok bool) {
	return c.certManagerNamespace, c.certManagerNamespace != ""
}

// ExportLogs copies every log the provider keeps into dir.
func (c *Cluster) ExportLogs(ctx context.Context, dir string) error {
	return c.backend.ExportLogs(ctx, dir)
}

// ServiceNetworkFromHost says tools run on this machine may dial the cluster's Service and
// pod addresses; when false they must go through the API server (port-forward).
func (c *Cluster) ServiceNetworkFromHost() bool { return c.serviceNetwork }

// Container freezes, resumes or kills a container of a running pod from outside Kubernetes
// (no SIGTERM, no cleanup), however the provider runs containers.
func (c *Cluster) Container(ctx context.Context, pod *corev1.Pod, container string, action cluster.ContainerAction) error {
	return c.backend.Container(ctx, pod, container, action)
}

// DialPod opens a TCP connection to port of a running pod, however the provider reaches pod
// addresses (directly, from a node, or through a port-forward).
func (c *Cluster) DialPod(ctx context.Context, pod *corev1.Pod, port int32) (net.Conn, error) {
	return c.backend.DialPod(ctx, pod, port)
}

// PodMemory returns the working-set bytes of each running container of pod, by container
// name, as the kubelet of the pod's node reports them now, however the provider reaches that
// kubelet (through the API server's node proxy, or directly).
func (c *Cluster) PodMemory(ctx context.Context, pod *corev1.Pod) (map[string]uint64, error) {
	if pod.Spec.NodeName == "" {
		return nil, fmt.Errorf("reading the memory of pod %s/%s: it is not scheduled to a node, no kubelet to ask", pod.Namespace, pod.Name)
	}
	summary, err := c.backend.NodeStats(ctx, pod.Spec.NodeName)
	if err != nil {
		return nil, fmt.Errorf("reading the memory of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return podstats.ContainerMemory(summary, pod)
}

// ServedCertificates connects to Service ns/name on port the way the API server does (TLS,
// ServerName <name>.<ns>.svc) and returns the certificate chain the server presents, within
// 10 s. It does not verify the chain: scenarios compare what is served with what should be.
func (c *Cluster) ServedCertificates(ctx context.Context, ns, name string, port int32) ([]*x509.Certificate, error) {
	return c.ServedCertificatesWithin(ctx, ns, name, port, 10*time.Second)
}

// ServedCertificatesWithin is ServedCertificates waiting up to wait for the server's answer:
// for a server held back on purpose.
func (c *Cluster) ServedCertificatesWithin(ctx context.Context, ns, name string, port int32, wait time.Duration) ([]*x509.Certificate, error) {
	svc, err := c.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting Service %s/%s: %w", ns, name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, err := c.backend.DialService(ctx, svc.Spec.ClusterIP, port)
	if err != nil {
		return nil, fmt.Errorf("connecting to Service %s/%s port %d: %w", ns, name, port, err)
	}
	where := fmt.Sprintf("Service %s/%s at %s", ns, name, net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port))))
	return handshakeChain(ctx, conn, name+"."+ns+".svc", where)
}

// PodServedCertificates connects to port of pod (however the provider reaches pods) and
// returns the certificate chain it presents for ServerName host, within 10 s, unverified.
func (c *Cluster) PodServedCertificates(ctx context.Context, pod *corev1.Pod, port int32, host string) ([]*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := c.backend.DialPod(ctx, pod, port)
	if err != nil {
		return nil, fmt.Errorf("connecting to pod %s/%s port %d: %w", pod.Namespace, pod.Name, port, err)
	}
	return handshakeChain(ctx, conn, host, fmt.Sprintf("pod %s/%s port %d", pod.Namespace, pod.Name, port))
}

// handshakeChain makes a TLS handshake for host over conn (to where, for messages) and returns
// the chain the server presents; it closes conn.
func handshakeChain(ctx context.Context, conn net.Conn, host, where string) ([]*x509.Certificate, error) {
	tc := tls.Client(conn, &tls.Config{ServerName: host, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // G402: we inspect the served chain, whoever signed it; nothing is trusted
	// Only the handshake's chain is used: how the close goes does not matter.
	defer func() { _ = tc.Close() }()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS handshake with %s (%s): %w", where, host, err)
	}
	chain := tc.ConnectionState().PeerCertificates
	if len(chain) == 0 {
		return nil, errors.New("the server presented no certificate")
	}
	return chain, nil
}
