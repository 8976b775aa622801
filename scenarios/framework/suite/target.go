package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	helmchart "helm.sh/helm/v3/pkg/chart"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// Timeouts of a target's installation.
const (
	// targetReadyTimeout bounds the wait for the target's Deployment: Gatekeeper's three
	// replicas start one after another on a busy machine.
	targetReadyTimeout = 5 * time.Minute
	// setupAppliedTimeout bounds the retries of a setup object whose kind the target's
	// controllers create (a Constraint's, once its ConstraintTemplate is compiled).
	setupAppliedTimeout = 2 * time.Minute
)

// DefaultTarget is the target a suite of targets installs unless --target says otherwise.
const DefaultTarget = "gauntlet"

// TargetPath is where target name's description is: scenarios/targets/<name>, or name itself
// when it is a path (it holds a slash or a dot).
func TargetPath(name string) (string, error) {
	if strings.ContainsAny(name, `/\.`) {
		return name, nil
	}
	root, err := workspace.Root()
	if err != nil {
		return "", fmt.Errorf("target %s: %w", name, err)
	}
	path := filepath.Join(root, filepath.Dir(target.SchemaFile), name)
	if _, err := os.Stat(path); err != nil {
		names, _ := TargetNames()
		return "", fmt.Errorf("no target %s (known: %s; or give a path to a description)", name, strings.Join(names, ", "))
	}
	return path, nil
}

// TargetNames are the targets gauntlet ships: the directories of scenarios/targets that hold a
// description, sorted.
func TargetNames() ([]string, error) {
	root, err := workspace.Root()
	if err != nil {
		return nil, err
	}
	known, err := filepath.Glob(filepath.Join(root, filepath.Dir(target.SchemaFile), "*", target.FileName))
	var names []string
	for _, k := range known {
		names = append(names, filepath.Base(filepath.Dir(k)))
	}
	return names, err
}

// loadTarget reads the target --target names (TargetPath) and settles its mode: mode "" is
// the target's first declared mode.
func loadTarget(name, mode string) (*target.Target, string, error) {
	path, err := TargetPath(name)
	if err != nil {
		return nil, "", fmt.Errorf("--target: %w", err)
	}
	t, err := target.Load(path)
	if err != nil {
		return nil, "", err
	}
	declared := t.CertModes.Declared()
	switch {
	case mode == "":
		mode = declared[0]
	case !slices.Contains(declared, mode):
		if why, ok := t.CertModes.NotApplicable[mode]; ok {
			return nil, "", fmt.Errorf("--target-mode %s: target %s does not support it: %s", mode, t.Name, why)
		}
		return nil, "", fmt.Errorf("--target-mode %s: target %s declares %s", mode, t.Name, strings.Join(declared, ", "))
	}
	return t, mode, nil
}

// rendered is a target's chart rendered for its mode, before any cluster exists: what the
// cluster must run (its images, their programs) and what the install needs.
type rendered struct {
	chart  *helmchart.Chart
	values map[string]any
	served target.Served
	// objs are the rendered objects (CRDs aside): their commands settle where images hold
	// their programs (Target.Entrypoints).
	objs []*unstructured.Unstructured
	crds []*unstructured.Unstructured
	// runtimeWebhooks: the chart renders no webhook configuration, the operator registers its
	// own once it runs; served is read from the cluster after the install (installTarget).
	runtimeWebhooks bool
	// ca signs external mode's serving certificate (nil in the other modes). It is made first:
	// a chart may refuse to render without a caBundle.
	ca *pki.CertificateAuthority
}

// render loads t's chart (from its module, fetched if need be, or its directory) and renders
// it in mode with the values its description gives (and extra merged over them, nil for none),
// for a cluster of Kubernetes kubeVersion.
func render(ctx context.Context, t *target.Target, mode, kubeVersion string, extra map[string]any) (*rendered, error) {
	r := &rendered{}
	var err error
	if r.chart, err = t.LoadChart(ctx); err != nil {
		return nil, err
	}
	caBundle := ""
	if mode == target.External {
		if r.ca, err = pki.NewCertificateAuthority("gauntlet external CA for target "+t.Name, 10*365*24*time.Hour); err != nil {
			return nil, err
		}
		caBundle = r.ca.CABundle()
	}
	r.values = chart.MergeValues(t.Values(mode, caBundle), extra)
	objs, err := chart.RenderChartFor(r.chart, t.Chart.Release, t.Chart.Namespace, r.values, kubeVersion)
	if err != nil {
		return nil, fmt.Errorf("%w (values: %v)", err, r.values)
	}
	crds, err := chart.CRDs(r.chart)
	if err != nil {
		return nil, err
	}
	r.objs, r.crds = objs, crds
	if !target.RegistersWebhooks(objs) {
		// The operator registers its webhooks itself once it runs: installTarget reads them
		// from the cluster (ServedAtRuntime). Until then the Deployment is the one named.
		if t.Names.Deployment == "" {
			return nil, fmt.Errorf("reading target %s's rendered chart: it registers no webhook (the operator registers its own at runtime): set names.deployment to the Deployment whose pods serve them", t.Name)
		}
		r.runtimeWebhooks = true
		r.served = target.Served{Namespace: t.Chart.Namespace, Deployment: t.Names.Deployment, Secret: t.Names.Secret}
		return r, nil
	}
	if r.served, err = target.ServedBy(slices.Concat(crds, objs), t.Chart.Namespace, t.Names); err != nil {
		return nil, fmt.Errorf("reading target %s's rendered chart: %w", t.Name, err)
	}
	return r, nil
}

// clusterRequest says what the suite's cluster needs: cert-manager for a release or target in
// that mode, and the target's images — their programs built, their files found, the chart
// rendered for the paths the images hold their programs at.
func (s *Suite) clusterRequest(ctx context.Context) (cluster.Request, error) {
	req := cluster.Request{CertManager: s.spec.CertManager}
	if s.target == nil {
		return req, nil
	}
	req.CertManager = req.CertManager || s.targetMode == target.CertManager
	err := s.progress.step("Building the images of target "+s.target.Name, func() error {
		images, err := s.target.Images(ctx, s.progress.writer())
		if err != nil {
			return err
		}
		if s.rendered, err = render(ctx, s.target, s.targetMode, s.opts.kubernetesVersion, nil); err != nil {
			return err
		}
		req.Images, err = s.target.Entrypoints(images, s.rendered.objs)
		return err
	})
	if err != nil {
		return req, err
	}
	err = s.progress.step("Building "+DelayProxyImage+", the delaying proxy W16 puts in front of a webhook", func() error {
		p, err := cluster.Lookup(s.opts.provider)
		if err != nil {
			return err
		}
		img, why, err := delayProxy(ctx, s.opts.provider, p)
		if img != nil {
			req.Images[DelayProxyImage] = *img
		}
		s.noDelayProxy = why
		return err
	})
	if err == nil {
		s.buildChainsaw(ctx)
	}
	return req, err
}

// DelayProxyImage is the image of gauntlet-delay-proxy (package delayproxy) that the cluster of
// a suite installing a target runs, when its provider runs images this run builds: W16 puts it
// in front of the target's webhook server to make the webhook slower than its timeoutSeconds.
// Its entrypoint is the proxy; its flags are the pod's args.
const DelayProxyImage = "gauntlet-delay-proxy:dev"

// delayProxyEntrypoint is where the delaying proxy's image holds it: the pod gives only args.
const delayProxyEntrypoint = "/gauntlet-delay-proxy"

// delayProxy builds the delaying proxy statically (an image FROM scratch runs it) for a
// cluster of p, the provider called provider, or says why that cluster cannot run it.
func delayProxy(ctx context.Context, provider string, p cluster.Provider) (*cluster.Image, string, error) {
	if !p.RunsImages {
		return nil, fmt.Sprintf("provider %s runs no image this run builds (its cluster pulls prebuilt images only), so the delaying proxy %s cannot run there", provider, DelayProxyImage), nil
	}
	dir := filepath.Join(workspace.BinDir(), "images", "gauntlet-delay-proxy")
	built, err := workspace.Build(ctx, dir, workspace.BuildOptions{Static: true}, workspace.DelayProxyPackage)
	if err != nil {
		return nil, "", err
	}
	return &cluster.Image{Binary: built[workspace.DelayProxyPackage], Entrypoint: delayProxyEntrypoint}, "", nil
}

// DelayProxy is the image of the delaying proxy the suite's cluster runs (DelayProxyImage), or
// "" and why it runs none. It stops the test when the suite installs no target.
func DelayProxy(ctx context.Context, t testing.TB) (image, why string) {
	t.Helper()
	s, ok := ctx.Value(suiteKey{}).(*Suite)
	if !ok || s.target == nil {
		t.Fatal("no target in the context: the delaying proxy runs in the clusters of suites that install a target (Spec.Target)")
	}
	if s.noDelayProxy != "" {
		return "", s.noDelayProxy
	}
	return DelayProxyImage, ""
}

// setupTarget installs the suite's target in its mode, as a user following the target's
// documentation would, and hands what it serves to the scenarios (TargetFrom).
func (s *Suite) setupTarget(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	if s.target == nil {
		return ctx, nil
	}
	var it *target.Installed
	err := s.progress.step(fmt.Sprintf("Installing target %s (%s mode)", s.target.Name, s.targetMode), func() (err error) {
		it, err = installTarget(ctx, s.cluster, s.target, s.targetMode, s.rendered)
		return err
	})
	if err != nil {
		s.setupErr = err
		return ctx, err
	}
	return context.WithValue(ctx, targetKey{}, it), nil
}

// installTarget makes the release namespace, external mode's Secret and the mode's setup
// objects, installs the chart r rendered, waits for the Deployment behind the webhook
// Service, and applies the target's setup objects.
func installTarget(ctx context.Context, c *Cluster, t *target.Target, mode string, r *rendered) (*target.Installed, error) {
	ns := t.Chart.Namespace
	if err := release.EnsureNamespace(ctx, c.Kube(), ns); err != nil {
		return nil, err
	}
	if r.ca != nil {
		sc, err := r.ca.Issue(pki.LeafOptions{DNSNames: []string{r.served.ServiceHost()}})
		if err != nil {
			return nil, err
		}
		if err := release.ApplySecret(ctx, c.Kube(), pki.ServingSecret(ns, r.served.Secret, sc, false)); err != nil {
			return nil, err
		}
	}
	if err := applyManifests(ctx, c, t, t.CertModes.Mode(mode).Setup, ns); err != nil {
		return nil, err
	}
	if err := c.Installer().InstallChart(ctx, r.chart, t.Chart.Release, ns, r.values); err != nil {
		return nil, err
	}
	if err := release.WaitDeploymentAvailable(ctx, c.Kube(), ns, r.served.Deployment, targetReadyTimeout); err != nil {
		return nil, err
	}
	if err := applyManifests(ctx, c, t, t.Setup, ""); err != nil {
		return nil, err
	}
	if r.runtimeWebhooks {
		served, err := servedAtRuntime(ctx, c, t, r)
		if err != nil {
			return nil, err
		}
		r.served = served
	}
	return &target.Installed{Target: t, Mode: mode, Namespace: ns, Served: r.served}, nil
}

// UpgradeTarget runs `helm upgrade` of the suite's target with extra merged over the values of
// its mode (nil: the mode's own values, which restores it after an upgrade with extra), as a
// user changing a setting would, and waits until the Deployment behind the webhook Service has
// rolled out, is Available, and the pods of its previous revision are gone (they would still
// serve, and hold Leases, with the old values).
func UpgradeTarget(ctx context.Context, t testing.TB, extra map[string]any) error {
	t.Helper()
	s, ok := ctx.Value(suiteKey{}).(*Suite)
	if !ok || s.target == nil || s.rendered == nil {
		t.Fatal("no target in the context: this scenario needs a suite that installs a target (Spec.Target)")
	}
	ns := s.target.Chart.Namespace
	values := chart.MergeValues(s.rendered.values, extra)
	if err := s.cluster.Installer().UpgradeChart(ctx, s.rendered.chart, s.target.Chart.Release, ns, values); err != nil {
		return fmt.Errorf("upgrading target %s: %w", s.target.Name, err)
	}
	name := s.rendered.served.Deployment
	if err := release.WaitDeploymentAvailable(ctx, s.cluster.Kube(), ns, name, targetReadyTimeout); err != nil {
		return err
	}
	d, err := s.cluster.Kube().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting Deployment %s/%s: %w", ns, name, err)
	}
	return release.WaitTerminatingGone(ctx, s.cluster.Kube(), ns, metav1.FormatLabelSelector(d.Spec.Selector), "Deployment "+ns+"/"+name, targetReadyTimeout)
}

// servedAtRuntime waits until the webhook configurations the operator registers itself (its
// setup objects, e.g. policies, may be what makes it register some) call the Service in front
// of names.deployment with every webhook the probes name, and reads what the checks need from
// them and the rendered chart (target.ServedAtRuntime).
func servedAtRuntime(ctx context.Context, c *Cluster, t *target.Target, r *rendered) (target.Served, error) {
	var served target.Served
	err := poll.Until(ctx, fmt.Sprintf("target %s to register the webhooks its probes name", t.Name), setupAppliedTimeout, func(ctx context.Context) (bool, string, error) {
		configs, err := liveWebhookConfigurations(ctx, c)
		if err != nil {
			return false, err.Error(), nil
		}
		s, skipped, err := target.ServedAtRuntime(slices.Concat(r.crds, r.objs), configs, t.Chart.Namespace, t.Names)
		if err != nil {
			return false, err.Error(), nil
		}
		var missing []string
		for _, p := range t.Probes {
			if !slices.ContainsFunc(s.Webhooks, func(w target.Webhook) bool { return w.Name == p.Webhook }) {
				missing = append(missing, p.Webhook)
			}
		}
		if len(missing) > 0 {
			var have []string
			for _, w := range s.Webhooks {
				have = append(have, w.Configuration+"/"+w.Name)
			}
			return false, fmt.Sprintf("probed webhooks %s not registered (registered: %s; not the target's Deployment's: %s)", strings.Join(missing, ", "), strings.Join(have, ", "), strings.Join(skipped, ", ")), nil
		}
		served = s
		return true, "", nil
	})
	if err != nil {
		return served, fmt.Errorf("reading target %s's webhooks from the cluster: %w", t.Name, err)
	}
	return served, nil
}

// liveWebhookConfigurations lists the cluster's webhook configurations as objects with their Kind.
func liveWebhookConfigurations(ctx context.Context, c *Cluster) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	add := func(kind string, obj any) error {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion("admissionregistration.k8s.io/v1")
		u.SetKind(kind)
		out = append(out, u)
		return nil
	}
	v, err := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ValidatingWebhookConfigurations: %w", err)
	}
	for i := range v.Items {
		if err := add("ValidatingWebhookConfiguration", &v.Items[i]); err != nil {
			return nil, err
		}
	}
	m, err := c.Kube().AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	for i := range m.Items {
		if err := add("MutatingWebhookConfiguration", &m.Items[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// applyManifests applies the objects of each manifest (server-side apply, in ns when their kind
// is namespaced and they name none), retrying one whose kind the cluster does not serve yet.
func applyManifests(ctx context.Context, c *Cluster, t *target.Target, manifests []string, ns string) error {
	for _, m := range manifests {
		objs, err := t.Objects(m)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			what := fmt.Sprintf("%s %s of %s", obj.GetKind(), obj.GetName(), m)
			err := poll.Until(ctx, "the cluster to accept "+what, setupAppliedTimeout, func(ctx context.Context) (bool, string, error) {
				err := apply(ctx, c, obj, ns)
				if err != nil {
					return false, err.Error(), nil
				}
				return true, "", nil
			})
			if err != nil {
				return fmt.Errorf("applying target %s's setup: %w", t.Name, err)
			}
		}
	}
	return nil
}

func apply(ctx context.Context, c *Cluster, obj *unstructured.Unstructured, ns string) error {
	res, err := c.ResourceOf(obj, ns)
	if err != nil {
		return err
	}
	_, err = res.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "gauntlet", Force: true})
	return err
}
