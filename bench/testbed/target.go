package testbed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/local"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// TargetSide is one side of an A/B run of a target: its description at one version.
type TargetSide struct {
	// Name says what the side runs, e.g. "gatekeeper v3.17.0".
	Name string
	// Target is the description (Target.AtVersion for the side at another version).
	Target *target.Target
	// Values are chart values set over the mode's, on this side.
	Values map[string]any
}

// TargetObject is what the dry-run creates of a target's ladder create: the admitted object of
// the target's first probe, in the namespace of the ladder, under a new name each time.
type TargetObject struct {
	// Probe is the webhook whose probe the object is, Manifest the manifest it is read from.
	Probe, Manifest string
	// Resource is the object's resource as the cluster serves it.
	Resource schema.GroupVersionResource
	// Kind is the object's kind.
	Kind string

	admitted, denied *unstructured.Unstructured
}

// Object builds the admitted object in namespace ns under name (a load.ObjectFunc).
func (o *TargetObject) Object(ns, name string) *unstructured.Unstructured {
	return named(o.admitted, ns, name)
}

func named(obj *unstructured.Unstructured, ns, name string) *unstructured.Unstructured {
	u := obj.DeepCopy()
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// SeparateClustersReason is why the two sides of a target's A/B run get a cluster each: what a
// release of an operator the bench did not write shares with any other in one cluster. The
// report and the progress state it, with what it costs (the clusters' own difference, measured
// by the control ladders of each side).
const SeparateClustersReason = "a target's two releases cannot share one cluster: their CRDs are cluster-scoped (one version's schemas " +
	"would serve the other), and both controllers would reconcile the same cluster-scoped policy objects (a ConstraintTemplate, " +
	"a Constraint, a mutator), each with its own code"

// StartTargetAB creates two local clusters, one per side (SeparateClustersReason), and in each
// installs the side's target as the conformance suite does (suite.PrepareTarget, InstallOn:
// chart, mode's setup, the target's setup objects), deploys the floor with webhooks matching
// the probe object's resource, and makes the bench namespaces: WebhookNamespace, which the
// target's webhooks judge, and ControlNamespace and FloorNamespace, which they skip (every
// webhook of the target gets a namespaceSelector expression skipping ControlLabel). Both
// clusters stay up; the benchmark loads one at a time.
func StartTargetAB(ctx context.Context, opts LocalOptions, a, b TargetSide) (_ *Pair, err error) {
	logf := logfTo(opts.Progress)
	name := opts.ClusterName
	if name == "" {
		name = "gauntlet-bench-ab"
	}
	logf("each side gets a local cluster of its own: %s", SeparateClustersReason)
	pair := &Pair{Separate: true}
	defer func() {
		if err != nil {
			if cerr := pair.Close(context.WithoutCancel(ctx)); cerr != nil {
				err = fmt.Errorf("%w (and tearing down: %v)", err, cerr)
			}
		}
	}()
	floor, err := BuildFloor(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range []struct {
		side string
		ts   TargetSide
		tb   **Testbed
	}{{"a", a, &pair.A}, {"b", b, &pair.B}} {
		start := time.Now()
		prepared, err := suite.PrepareTarget(ctx, s.ts.Target, "", s.ts.Values, local.DefaultKubernetesVersion, progressOrDiscard(opts.Progress))
		if err != nil {
			return nil, fmt.Errorf("side %s, %s: %w", strings.ToUpper(s.side), s.ts.Name, err)
		}
		logf("built and rendered %s for side %s (%.1fs)", s.ts.Name, strings.ToUpper(s.side), time.Since(start).Seconds())
		images := local.NodeImages(prepared.Images)
		images[FloorImage] = procnode.Image{Binary: floor}
		tb := &Testbed{Provider: "local", side: s.side}
		*s.tb = tb
		if err := startTargetSide(ctx, tb, name+"-"+s.side, images, prepared, s.ts, opts, logf); err != nil {
			return nil, fmt.Errorf("side %s, %s: %w", strings.ToUpper(s.side), s.ts.Name, err)
		}
	}
	return pair, nil
}

// startTargetSide creates cluster name for one side and installs everything into it.
func startTargetSide(ctx context.Context, tb *Testbed, name string, images map[string]procnode.Image, prepared *suite.PreparedTarget,
	side TargetSide, opts LocalOptions, logf func(string, ...any)) error {
	kubeconfig, err := startLocalCluster(ctx, tb, name, images, opts, logf)
	if err != nil {
		return err
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	restConfig.QPS, restConfig.Burst = -1, 0
	tb.REST = restConfig
	kube, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("building a Kubernetes client from %s: %w", kubeconfig, err)
	}
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("building a dynamic client from %s: %w", kubeconfig, err)
	}
	start := time.Now()
	installed, err := prepared.InstallOn(ctx, name, kubeconfig, logf)
	if err != nil {
		return err
	}
	logf("installed %s in %s mode on cluster %s, its setup objects applied (%.1fs)", side.Name, installed.Mode, name, time.Since(start).Seconds())
	if tb.Object, err = targetObject(kube, side.Target); err != nil {
		return err
	}
	if err := skipControlNamespaces(ctx, kube, installed.Served); err != nil {
		return err
	}
	objs := FloorObjects{Resource: tb.Object.Resource, Admitted: tb.Object.Object, What: side.Name + "'s"}
	if tb.Object.denied != nil {
		objs.Denied = func(ns, name string) *unstructured.Unstructured { return named(tb.Object.denied, ns, name) }
	}
	if err := InstallFloorFor(ctx, kube, dyn, restConfig, objs, logf); err != nil {
		return err
	}
	tb.FloorNamespace = FloorNamespace
	return tb.finishTarget(ctx, kube, dyn, side.Name, logf)
}

// targetObject reads the admitted (and denied) object of t's first probe and maps its kind to
// the resource this cluster serves it as; it must be namespaced, since the ladders create it in
// namespaces that the webhooks judge or skip.
func targetObject(kube kubernetes.Interface, t *target.Target) (*TargetObject, error) {
	if len(t.Probes) == 0 {
		return nil, fmt.Errorf("target %s declares no probe: the bench creates a probe's admitted object", t.Name)
	}
	p := t.Probes[0]
	admitted, err := t.Object(p.Admitted)
	if err != nil {
		return nil, err
	}
	o := &TargetObject{Probe: p.Webhook, Manifest: p.Admitted, Kind: admitted.GetKind(), admitted: admitted}
	if p.Denied != nil {
		if o.denied, err = t.Object(p.Denied.Object); err != nil {
			return nil, err
		}
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	gvk := admitted.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("the admitted object of target %s's probe of %s (%s): the cluster serves no %s: %w", t.Name, p.Webhook, p.Admitted, gvk, err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil, fmt.Errorf("the admitted object of target %s's first probe (of %s, %s) is a %s, which is not namespaced: "+
			"the bench creates it in namespaces the webhooks judge or skip, so list a probe of a namespaced object first", t.Name, p.Webhook, p.Admitted, gvk.Kind)
	}
	o.Resource = m.Resource
	return o, nil
}

// skipControlNamespaces makes every webhook the target serves skip namespaces labelled
// ControlLabel, by adding that expression to its namespaceSelector (the chart has no common
// value for it): the control and floor namespaces then take the same API-server path without
// the target's webhooks.
func skipControlNamespaces(ctx context.Context, kube kubernetes.Interface, served target.Served) error {
	validating, mutating := served.Configurations()
	admission := kube.AdmissionregistrationV1()
	// The target's own certificate rotator may write a configuration's caBundle meanwhile:
	// read it again and retry on a conflict.
	for _, n := range validating {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := admission.ValidatingWebhookConfigurations().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for i := range c.Webhooks {
				c.Webhooks[i].NamespaceSelector = skippingControl(c.Webhooks[i].NamespaceSelector)
			}
			_, err = admission.ValidatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("making ValidatingWebhookConfiguration %s skip the control namespaces: %w", n, err)
		}
	}
	for _, n := range mutating {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := admission.MutatingWebhookConfigurations().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for i := range c.Webhooks {
				c.Webhooks[i].NamespaceSelector = skippingControl(c.Webhooks[i].NamespaceSelector)
			}
			_, err = admission.MutatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("making MutatingWebhookConfiguration %s skip the control namespaces: %w", n, err)
		}
	}
	return nil
}

// skippingControl is sel that also excludes namespaces labelled ControlLabel.
func skippingControl(sel *metav1.LabelSelector) *metav1.LabelSelector {
	out := &metav1.LabelSelector{}
	if sel != nil {
		out = sel.DeepCopy()
	}
	skip := metav1.LabelSelectorRequirement{Key: ControlLabel, Operator: metav1.LabelSelectorOpDoesNotExist}
	if !slices.ContainsFunc(out.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool { return r.Key == skip.Key }) {
		out.MatchExpressions = append(out.MatchExpressions, skip)
	}
	return out
}

// finishTarget makes the bench namespaces on a target's cluster and waits until the target's
// webhooks judge the webhook namespace (its probe's denied object is refused there) and skip the
// control one (admitted there).
func (t *Testbed) finishTarget(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, what string, logf func(string, ...any)) error {
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the API server version: %w", err)
	}
	t.KubernetesVersion = v.GitVersion
	t.WebhookNamespace, t.ControlNamespace = WebhookNamespace, ControlNamespace
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: t.WebhookNamespace}},
		{ObjectMeta: metav1.ObjectMeta{Name: t.ControlNamespace, Labels: map[string]string{ControlLabel: "true"}}},
	} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Namespace %s: %w", ns.Name, err)
		}
	}
	o := t.Object
	if o.denied == nil {
		logf("the probe of %s has no denied object: the routing of namespaces %s and %s is not checked", o.Probe, t.WebhookNamespace, t.ControlNamespace)
		return nil
	}
	start := time.Now()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	err = poll.Until(ctx, fmt.Sprintf("%s to deny its probe's denied %s in namespace %s and to skip namespace %s", what, o.Kind, t.WebhookNamespace, t.ControlNamespace),
		2*time.Minute, func(ctx context.Context) (bool, string, error) {
			name := "bench-probe-" + rand.String(5)
			if _, err := dyn.Resource(o.Resource).Namespace(t.WebhookNamespace).Create(ctx, named(o.denied, t.WebhookNamespace, name), dry); err == nil {
				return false, t.WebhookNamespace + ": the denied object was admitted", nil
			}
			if _, err := dyn.Resource(o.Resource).Namespace(t.ControlNamespace).Create(ctx, named(o.denied, t.ControlNamespace, name), dry); err != nil {
				return false, t.ControlNamespace + ": " + err.Error(), nil
			}
			return true, "", nil
		})
	if err != nil {
		return err
	}
	logf("%s denies in namespace %s and is skipped in %s (%.1fs)", what, t.WebhookNamespace, t.ControlNamespace, time.Since(start).Seconds())
	return nil
}
