// Package release installs, upgrades and uninstalls releases of charts/dynamo-operator on a
// cluster with the Helm SDK, and waits for them the way a user checks them: the operator
// Deployment rolled out, the webhooks answering through the API server, the caBundles holding
// the CA, the namespace Lease held. It also installs the documented multi-operator Topology and
// reads back what a release keeps on the cluster (its certificate Secret, its caBundles).
package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	helmchart "helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// helmTimeout bounds one Helm call (creating the chart's objects, not waiting for them).
const helmTimeout = 2 * time.Minute

// Installer installs, upgrades and uninstalls charts/dynamo-operator on one cluster with the
// Helm SDK, exactly like `helm install --kubeconfig <file>`, and waits for the result the way
// a user checks it. Every long step is reported through the Logf option.
type Installer struct {
	kubeconfig string
	rest       *rest.Config
	kube       kubernetes.Interface
	dynamic    dynamic.Interface
	crds       apiextensionsclient.Interface
	chart      *helmchart.Chart
	values     map[string]any
	logf       func(format string, args ...any)
}

// InstallerOption configures an Installer.
type InstallerOption func(*Installer)

// WithLogf reports each step (what is being installed or waited for, and how it ended).
func WithLogf(logf func(format string, args ...any)) InstallerOption {
	return func(i *Installer) { i.logf = logf }
}

// WithChart installs ch instead of the workspace's charts/dynamo-operator.
func WithChart(ch *helmchart.Chart) InstallerOption {
	return func(i *Installer) { i.chart = ch }
}

// WithValues sets chart values under every release's own (a release's values win): what a
// cluster needs so that the chart runs the operator under test there, e.g. an image an existing
// cluster can pull. Nil changes nothing.
func WithValues(values map[string]any) InstallerOption {
	return func(i *Installer) { i.values = values }
}

// NewInstaller returns an Installer for the cluster kubeconfig points at.
func NewInstaller(kubeconfig string, opts ...InstallerOption) (*Installer, error) {
	i := &Installer{kubeconfig: kubeconfig, logf: func(string, ...any) {}}
	for _, o := range opts {
		o(i)
	}
	cfg, err := RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	i.rest = cfg
	if i.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("building a Kubernetes client from %s: %w", kubeconfig, err)
	}
	if i.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("building a dynamic client from %s: %w", kubeconfig, err)
	}
	if i.crds, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("building an apiextensions client from %s: %w", kubeconfig, err)
	}
	if i.chart == nil {
		if i.chart, err = chart.Load(); err != nil {
			return nil, err
		}
	}
	return i, nil
}

// RESTConfig loads kubeconfig for a test client: client-go's default of 5 requests per second
// would throttle wait loops that read several objects per poll, and a throttled request near a
// deadline fails with a rate-limiter error instead of showing the cluster's state.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

// helm returns a Helm action configuration for namespace ("" = all namespaces, for listing).
func (i *Installer) helm(namespace string) (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &i.kubeconfig
	flags.Namespace = &namespace
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("initialising Helm for namespace %q: %w", namespace, err)
	}
	return cfg, nil
}

// Install runs `helm install` of r (defaults filled in and written back to r). In External and
// OLM mode it first creates the namespace and the certificate Secret, generating the
// certificate when r.Serving is nil. It does not wait for the operator; see WaitReady.
func (i *Installer) Install(ctx context.Context, r *chart.Release) error {
	took, err := i.runHelm(ctx, r, "install", func(cfg *action.Configuration, vals map[string]any) error {
		return install(ctx, cfg, i.chart, r.Name, r.Namespace, vals)
	})
	if err != nil {
		return err
	}
	i.logf("helm install %s: %s mode into namespace %s (%.1fs)", r.Name, r.Mode, r.Namespace, took.Seconds())
	return nil
}

// InstallChart installs ch, any chart, as release name into namespace (created if need be)
// with values, like `helm install`; it does not wait. A target's chart is installed so.
func (i *Installer) InstallChart(ctx context.Context, ch *helmchart.Chart, name, namespace string, values map[string]any) error {
	cfg, err := i.helm(namespace)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := install(ctx, cfg, ch, name, namespace, values); err != nil {
		return fmt.Errorf("helm install of chart %s as %s/%s: %w (values: %v)", ch.Name(), namespace, name, err, values)
	}
	i.logf("helm install %s (chart %s %s) into namespace %s (%.1fs)", name, ch.Name(), ch.Metadata.Version, namespace, time.Since(start).Seconds())
	return nil
}

// UpgradeChart runs `helm upgrade` of release name in namespace to ch with exactly values (those
// of the previous revision are reset, not reused), like `helm upgrade --reset-values`; it does
// not wait. A target is upgraded so.
func (i *Installer) UpgradeChart(ctx context.Context, ch *helmchart.Chart, name, namespace string, values map[string]any) error {
	cfg, err := i.helm(namespace)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := upgrade(ctx, cfg, ch, name, namespace, values); err != nil {
		return fmt.Errorf("helm upgrade of %s/%s to chart %s: %w (values: %v)", namespace, name, ch.Name(), err, values)
	}
	i.logf("helm upgrade %s (chart %s %s) in namespace %s (%.1fs)", name, ch.Name(), ch.Metadata.Version, namespace, time.Since(start).Seconds())
	return nil
}

// upgrade runs `helm upgrade --reset-values` of release name in namespace to ch with values.
func upgrade(ctx context.Context, cfg *action.Configuration, ch *helmchart.Chart, name, namespace string, values map[string]any) error {
	client := action.NewUpgrade(cfg)
	client.Namespace = namespace
	client.ResetValues = true
	client.Timeout = helmTimeout
	_, err := client.RunWithContext(ctx, name, ch, values)
	return err
}

// install runs `helm install` of ch as release name into namespace, creating it.
func install(ctx context.Context, cfg *action.Configuration, ch *helmchart.Chart, name, namespace string, values map[string]any) error {
	client := action.NewInstall(cfg)
	client.ReleaseName = name
	client.Namespace = namespace
	client.CreateNamespace = true
	client.Timeout = helmTimeout
	_, err := client.RunWithContext(ctx, ch, values)
	return err
}

// Upgrade runs `helm upgrade` of an installed release with exactly r's current values (defaults
// filled in and written back to r): values of the previous revision are reset, not reused, so an
// upgrade back to a Release with no overrides really restores the chart's defaults. Like Install
// it does not wait; see WaitReady.
func (i *Installer) Upgrade(ctx context.Context, r *chart.Release) error {
	took, err := i.runHelm(ctx, r, "upgrade", func(cfg *action.Configuration, vals map[string]any) error {
		return upgrade(ctx, cfg, i.chart, r.Name, r.Namespace, vals)
	})
	if err != nil {
		return err
	}
	i.logf("helm upgrade %s in namespace %s (%.1fs)", r.Name, r.Namespace, took.Seconds())
	return nil
}

// runHelm does what Install and Upgrade share: it fills in r's defaults, prepares its
// certificates, computes its chart values (the Installer's under r's own) and runs the Helm
// action (helm <verb>) with them in r's namespace, returning how long the action took.
func (i *Installer) runHelm(ctx context.Context, r *chart.Release, verb string, run func(cfg *action.Configuration, vals map[string]any) error) (time.Duration, error) {
	*r = r.WithDefaults()
	if err := i.prepareCertificates(ctx, r); err != nil {
		return 0, err
	}
	vals, err := r.ChartValues()
	if err != nil {
		return 0, err
	}
	cfg, err := i.helm(r.Namespace)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := run(cfg, chart.MergeValues(i.values, vals)); err != nil {
		return 0, fmt.Errorf("helm %s of %s: %w", verb, r, err)
	}
	return time.Since(start), nil
}

// UninstallOptions say what to remove besides the release's own objects.
type UninstallOptions struct {
	// CRDs deletes the Dynamo CRDs the chart keeps on uninstall (helm.sh/resource-policy: keep),
	// and with them every Dynamo object; finalizers are removed first, since no operator is left
	// to remove them.
	CRDs bool
	// Namespace deletes the release namespace, and with it the certificate Secret the
	// operator or cert-manager created, and waits until it is gone.
	Namespace bool
}

// Uninstall runs `helm uninstall` of r, waits until the operator's pods are gone, and removes
// what opts asks for. A release that is not installed is not an error.
func (i *Installer) Uninstall(ctx context.Context, r *chart.Release, opts UninstallOptions) error {
	d := r.WithDefaults()
	cfg, err := i.helm(d.Namespace)
	if err != nil {
		return err
	}
	client := action.NewUninstall(cfg)
	client.Timeout = helmTimeout
	start := time.Now()
	if _, err := client.Run(d.Name); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("helm uninstall of %s: %w", &d, err)
	}
	i.logf("helm uninstall %s in namespace %s (%.1fs)", d.Name, d.Namespace, time.Since(start).Seconds())
	if err := WaitPodsGone(ctx, i.kube, d.Namespace, "app.kubernetes.io/instance="+d.Name, 2*time.Minute); err != nil {
		return err
	}
	if opts.CRDs {
		if err := DeleteDynamoCRDs(ctx, i.crds, i.dynamic, 2*time.Minute); err != nil {
			return err
		}
	}
	if opts.Namespace {
		if err := DeleteNamespace(ctx, i.kube, d.Namespace, 2*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// InstalledRelease is a Helm release found on the cluster.
type InstalledRelease struct {
	Name, Namespace, Chart, Status string
}

// Releases lists the Helm releases of charts/dynamo-operator in every namespace.
func (i *Installer) Releases(ctx context.Context) ([]InstalledRelease, error) {
	cfg, err := i.helm("")
	if err != nil {
		return nil, err
	}
	list := action.NewList(cfg)
	list.AllNamespaces = true
	list.StateMask = action.ListAll
	rels, err := list.Run()
	if err != nil {
		return nil, fmt.Errorf("listing Helm releases: %w", err)
	}
	var out []InstalledRelease
	for _, rel := range rels {
		if rel.Chart == nil || rel.Chart.Metadata == nil || rel.Chart.Metadata.Name != i.chart.Name() {
			continue
		}
		out = append(out, InstalledRelease{Name: rel.Name, Namespace: rel.Namespace, Chart: rel.Chart.Metadata.Name, Status: statusOf(rel)})
	}
	return out, nil
}

func statusOf(rel *helmrelease.Release) string {
	if rel.Info == nil {
		return ""
	}
	return rel.Info.Status.String()
}

// prepareCertificates creates what External and OLM mode expect the user to have made before
// `helm install`: the namespace and the Secret with the serving certificate.
func (i *Installer) prepareCertificates(ctx context.Context, r *chart.Release) error {
	if r.Mode != chart.External && r.Mode != chart.OLM {
		return nil
	}
	if r.Serving == nil {
		sc, err := pki.NewServingCertificate(r.ServiceHost())
		if err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
		r.Serving = sc
	}
	if err := EnsureNamespace(ctx, i.kube, r.Namespace); err != nil {
		return err
	}
	secret := pki.ServingSecret(r.Namespace, r.SecretName(), r.Serving, r.Mode == chart.OLM)
	return ApplySecret(ctx, i.kube, secret)
}

// ApplySecret creates s, or replaces the data of an existing Secret of the same name.
func ApplySecret(ctx context.Context, kube kubernetes.Interface, s *corev1.Secret) error {
	ref := s.Namespace + "/" + s.Name
	existing, err := kube.CoreV1().Secrets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := kube.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Secret %s: %w", ref, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("getting Secret %s: %w", ref, err)
	}
	if existing.Type != s.Type {
		// The type of a Secret is immutable: replace it.
		if err := kube.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting Secret %s to change its type to %s: %w", ref, s.Type, err)
		}
		if _, err := kube.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Secret %s: %w", ref, err)
		}
		return nil
	}
	existing.Data = s.Data
	if _, err := kube.CoreV1().Secrets(s.Namespace).Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating Secret %s: %w", ref, err)
	}
	return nil
}

// EnsureNamespace creates namespace ns unless it exists.
func EnsureNamespace(ctx context.Context, kube kubernetes.Interface, ns string) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Namespace %s: %w", ns, err)
	}
	return nil
}

// DeleteDynamoCRDs removes the finalizers of every Dynamo object, deletes the Dynamo CRDs and
// waits until they are gone.
func DeleteDynamoCRDs(ctx context.Context, crds apiextensionsclient.Interface, dyn dynamic.Interface, timeout time.Duration) error {
	list, err := crds.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing CRDs: %w", err)
	}
	var names []string
	for _, crd := range list.Items {
		if crd.Spec.Group != dynamo.Group {
			continue
		}
		names = append(names, crd.Name)
		if err := removeFinalizers(ctx, dyn, crd.Spec.Group, crd.Spec.Names.Plural, storageVersion(crd.Spec.Versions)); err != nil {
			return err
		}
		if err := crds.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting CRD %s: %w", crd.Name, err)
		}
	}
	slices.Sort(names)
	return poll.Until(ctx, "CRDs "+strings.Join(names, ", ")+" to be deleted", timeout, func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, n := range names {
			if _, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{}); err == nil {
				left = append(left, n)
			} else if !apierrors.IsNotFound(err) {
				return false, err.Error(), nil
			}
		}
		return len(left) == 0, "still present: " + strings.Join(left, ", "), nil
	})
}

// removeFinalizers clears the finalizers of every object of a resource in every namespace.
func removeFinalizers(ctx context.Context, dyn dynamic.Interface, group, plural, version string) error {
	gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
	list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
	}
	for _, obj := range list.Items {
		if len(obj.GetFinalizers()) == 0 {
			continue
		}
		_, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing finalizers of %s %s/%s: %w", gvr.GroupResource(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

func storageVersion(versions []apiextensionsv1.CustomResourceDefinitionVersion) string {
	for _, v := range versions {
		if v.Storage {
			return v.Name
		}
	}
	if len(versions) > 0 {
		return versions[0].Name
	}
	return ""
}

// DeleteNamespace deletes namespace ns and waits until it is gone.
func DeleteNamespace(ctx context.Context, kube kubernetes.Interface, ns string, timeout time.Duration) error {
	err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting Namespace %s: %w", ns, err)
	}
	return poll.Until(ctx, "Namespace "+ns+" to be deleted", timeout, func(ctx context.Context) (bool, string, error) {
		got, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, namespaceState(got), nil
	})
}

func namespaceState(ns *corev1.Namespace) string {
	parts := []string{"phase " + string(ns.Status.Phase)}
	for _, c := range ns.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			parts = append(parts, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// SuiteNamespaceLabel marks the namespaces a suite created, so that what a suite leaves on a
// kept or existing cluster can be found and removed.
const SuiteNamespaceLabel = "e2e.gauntlet.dev/suite"

// RemoveAll removes what suites install on a cluster: every Dynamo object and CRD, every
// release of the chart (with its namespace) and the namespaces matching namespaceSelector.
func (i *Installer) RemoveAll(ctx context.Context, namespaceSelector string) error {
	if err := DeleteDynamoCRDs(ctx, i.crds, i.dynamic, 2*time.Minute); err != nil {
		return err
	}
	rels, err := i.Releases(ctx)
	if err != nil {
		return err
	}
	for _, rel := range rels {
		r := &chart.Release{Name: rel.Name, Namespace: rel.Namespace}
		if err := i.Uninstall(ctx, r, UninstallOptions{Namespace: true}); err != nil {
			return err
		}
	}
	nss, err := i.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: namespaceSelector})
	if err != nil {
		return fmt.Errorf("listing namespaces labelled %s: %w", namespaceSelector, err)
	}
	for _, ns := range nss.Items {
		if err := DeleteNamespace(ctx, i.kube, ns.Name, 2*time.Minute); err != nil {
			return err
		}
	}
	return nil
}
