// Package existing runs the suites against a cluster someone else made, named by KUBECONFIG:
// a real multi-node cluster, or a kind cluster from the kind provider. It creates and deletes
// no cluster; the operator image comes from IMAGE (pullable by the nodes, or preloaded). It
// refuses a cluster that already runs the Dynamo operator (the suite would replace or delete
// it), and removes everything the suite installed when the suite ends.
package existing

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
)

// ProviderName is the name suites choose this provider by (--provider=existing).
const ProviderName = "existing"

// Environment variables the provider reads.
const (
	// ImageEnv names the operator image under test, repository:tag.
	ImageEnv = "IMAGE"
	// CertManagerNamespaceEnv is cert-manager's cluster resource namespace (default cert-manager).
	CertManagerNamespaceEnv = "CERT_MANAGER_NAMESPACE"
)

func init() {
	cluster.Register(ProviderName, cluster.Provider{Start: start, Clusters: commandLine{},
		// The suite's own process only; every suite uses the one cluster KUBECONFIG names.
		Footprint: cluster.Footprint{SharedCluster: true, Memory: 0.5 * cluster.GiB, FileHandles: 256}})
}

func start(ctx context.Context, req cluster.Request) (*cluster.Handle, error) {
	kubeconfig, err := kubeconfigPath()
	if err != nil {
		return nil, err
	}
	image := os.Getenv(ImageEnv)
	repo, tag, ok := splitImage(image)
	if !ok {
		return nil, fmt.Errorf("PROVIDER=existing needs %s=<repository>:<tag> of the operator under test, pullable by the cluster's nodes or preloaded on them, built with the same VERSION (got %q)", ImageEnv, image)
	}
	b, err := connect(kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := req.Step("Checking the existing cluster at "+kubeconfig, func() error { return checkUntouched(ctx, b.kube, b.installer) }); err != nil {
		return nil, err
	}
	h := &cluster.Handle{
		Kubeconfig:     kubeconfig,
		OperatorValues: map[string]any{"image": map[string]any{"repository": repo, "tag": tag}},
		Backend:        b,
	}
	if req.CertManager {
		ns := certManagerNamespace()
		if err := req.Step(checkingCertManager(ns), func() error { return certmanager.WaitReady(ctx, b.rest, ns, time.Minute) }); err != nil {
			return nil, fmt.Errorf("this suite needs cert-manager on the existing cluster: %w (install cert-manager, or set %s)", err, CertManagerNamespaceEnv)
		}
		h.CertManagerNamespace = ns
		b.probeIssuerNamespace = ns
	}
	return h, nil
}

// connect makes the clients of the cluster kubeconfig names.
func connect(kubeconfig string) (*backend, error) {
	installer, err := release.NewInstaller(kubeconfig)
	if err != nil {
		return nil, err
	}
	rc, err := release.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &backend{kube: kube, rest: rc, installer: installer}, nil
}

// certManagerNamespace is cert-manager's cluster resource namespace: CERT_MANAGER_NAMESPACE,
// or cert-manager.
func certManagerNamespace() string {
	if ns := os.Getenv(CertManagerNamespaceEnv); ns != "" {
		return ns
	}
	return "cert-manager"
}

// checkingCertManager is the title of the step that checks cert-manager in namespace ns.
func checkingCertManager(ns string) string {
	return "Checking cert-manager (a probe Issuer in " + ns + " is Ready)"
}

// kubeconfigPath is the first file of $KUBECONFIG, which must exist.
func kubeconfigPath() (string, error) {
	env := os.Getenv("KUBECONFIG")
	if env == "" {
		return "", fmt.Errorf("PROVIDER=existing needs KUBECONFIG=<file> naming the cluster to run on: KUBECONFIG is not set")
	}
	path := filepath.SplitList(env)[0]
	if _, err := os.Stat(path); err != nil { //nolint:gosec // G703: the kubeconfig the user names in KUBECONFIG, on purpose
		return "", fmt.Errorf("PROVIDER=existing: KUBECONFIG names %s: %w", path, err)
	}
	return path, nil
}

// splitImage splits repository:tag; the tag is after the last colon that follows the last slash.
func splitImage(image string) (repo, tag string, ok bool) {
	i := strings.LastIndex(image, ":")
	if i <= strings.LastIndex(image, "/") || i == len(image)-1 || i == 0 {
		return "", "", false
	}
	return image[:i], image[i+1:], true
}

// checkUntouched answers within 10 s and has no Dynamo operator: no release of the chart, no
// Dynamo CRD.
func checkUntouched(ctx context.Context, kube kubernetes.Interface, installer *release.Installer) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return fmt.Errorf("the cluster does not answer: %w", err)
	}
	rels, err := installer.Releases(ctx)
	if err != nil {
		return err
	}
	var found []string
	for _, r := range rels {
		found = append(found, fmt.Sprintf("Helm release %s/%s", r.Namespace, r.Name))
	}
	nss, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: release.SuiteNamespaceLabel})
	if err != nil {
		return err
	}
	for _, ns := range nss.Items {
		found = append(found, "namespace "+ns.Name+" of an earlier suite")
	}
	if len(found) > 0 {
		return fmt.Errorf("refusing to run: the suite would replace or delete what it did not create: %s; remove them first, or run on another cluster", strings.Join(found, ", "))
	}
	return nil
}

// backend acts on a cluster from outside it, through the API server only.
type backend struct {
	kube                 kubernetes.Interface
	rest                 *rest.Config
	installer            *release.Installer
	probeIssuerNamespace string
}

// ExportLogs writes every pod's current log (all namespaces) into dir, one file per container.
func (b *backend) ExportLogs(ctx context.Context, dir string) error {
	pods, err := b.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			raw, err := b.kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			if err != nil {
				raw = []byte("reading the log: " + err.Error() + "\n")
			}
			file := filepath.Join(dir, "pods", p.Namespace, p.Name, c.Name+".log")
			if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
				return err
			}
			if err := os.WriteFile(file, raw, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// Container can only kill, by deleting the pod with no grace period; a frozen container needs
// access to the node's runtime, which a cluster reached through its API server does not give.
func (b *backend) Container(ctx context.Context, pod *corev1.Pod, container string, action cluster.ContainerAction) error {
	if action != cluster.Kill {
		return fmt.Errorf("the existing provider cannot %s container %s of pod %s/%s: that needs the node's container runtime (run this scenario with PROVIDER=local or kind)", action, container, pod.Namespace, pod.Name)
	}
	err := b.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// NodeStats goes through the API server's node proxy, the only way to a node's kubelet from
// outside the cluster.
func (b *backend) NodeStats(ctx context.Context, node string) (*statsv1alpha1.Summary, error) {
	return cluster.NodeStatsThroughAPIServer(ctx, b.kube, node)
}

// Destroy removes everything the suite installed; the cluster stays.
func (b *backend) Destroy(ctx context.Context) error {
	if err := b.installer.RemoveAll(ctx, release.SuiteNamespaceLabel); err != nil {
		return err
	}
	if b.probeIssuerNamespace != "" {
		return certmanager.DeleteProbe(ctx, b.rest, b.probeIssuerNamespace)
	}
	return nil
}
