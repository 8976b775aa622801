package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	targets := filepath.Join(root, filepath.Dir(target.SchemaFile))
	path := filepath.Join(targets, name)
	if _, err := os.Stat(path); err != nil {
		known, _ := filepath.Glob(filepath.Join(targets, "*", target.FileName))
		var names []string
		for _, k := range known {
			names = append(names, filepath.Base(filepath.Dir(k)))
		}
		return "", fmt.Errorf("no target %s (known: %s; or give a path to a description)", name, strings.Join(names, ", "))
	}
	return path, nil
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

// setupTarget installs the suite's target in its mode, as a user following the target's
// documentation would, and hands what it serves to the scenarios (TargetFrom).
func (s *Suite) setupTarget(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	if s.target == nil {
		return ctx, nil
	}
	var it *target.Installed
	err := s.progress.step(fmt.Sprintf("Installing target %s (%s mode)", s.target.Name, s.targetMode), func() (err error) {
		it, err = installTarget(ctx, s.cluster, s.target, s.targetMode)
		return err
	})
	if err != nil {
		s.setupErr = err
		return ctx, err
	}
	return context.WithValue(ctx, targetKey{}, it), nil
}

func installTarget(ctx context.Context, c *Cluster, t *target.Target, mode string) (*target.Installed, error) {
	dir, err := t.ChartDir(ctx)
	if err != nil {
		return nil, err
	}
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading the chart of target %s from %s: %w", t.Name, dir, err)
	}
	ns, name := t.Chart.Namespace, t.Chart.Release
	// External mode's CA is made first: a chart may refuse to render without a caBundle, and
	// the serving certificate it signs needs the Service's name, which the rendered chart gives.
	var ca *pki.CertificateAuthority
	caBundle := ""
	if mode == target.External {
		if ca, err = pki.NewCertificateAuthority("gauntlet external CA for target "+t.Name, 10*365*24*time.Hour); err != nil {
			return nil, err
		}
		caBundle = ca.CABundle()
	}
	values := t.Values(mode, caBundle)
	objs, err := chart.RenderChart(ch, name, ns, values)
	if err != nil {
		return nil, fmt.Errorf("%w (values: %v)", err, values)
	}
	crds, err := chart.CRDs(ch)
	if err != nil {
		return nil, err
	}
	served, err := target.ServedBy(slices.Concat(crds, objs), ns, t.Names)
	if err != nil {
		return nil, fmt.Errorf("reading target %s's rendered chart: %w", t.Name, err)
	}
	if err := release.EnsureNamespace(ctx, c.Kube(), ns); err != nil {
		return nil, err
	}
	if ca != nil {
		sc, err := ca.Issue(pki.LeafOptions{DNSNames: []string{served.ServiceHost()}})
		if err != nil {
			return nil, err
		}
		if err := release.ApplySecret(ctx, c.Kube(), pki.ServingSecret(ns, served.Secret, sc, false)); err != nil {
			return nil, err
		}
	}
	if err := applyManifests(ctx, c, t, t.CertModes.Mode(mode).Setup, ns); err != nil {
		return nil, err
	}
	if err := c.Installer().InstallChart(ctx, ch, name, ns, values); err != nil {
		return nil, err
	}
	if err := release.WaitDeploymentAvailable(ctx, c.Kube(), ns, served.Deployment, targetReadyTimeout); err != nil {
		return nil, err
	}
	if err := applyManifests(ctx, c, t, t.Setup, ""); err != nil {
		return nil, err
	}
	return &target.Installed{Target: t, Mode: mode, Namespace: ns, Served: served}, nil
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

// clusterRequest says what the suite's cluster needs: cert-manager for a release or target in
// that mode, and the target's binaries, built first.
func (s *Suite) clusterRequest(ctx context.Context) (cluster.Request, error) {
	req := cluster.Request{CertManager: s.spec.CertManager}
	if s.target == nil {
		return req, nil
	}
	req.CertManager = req.CertManager || s.targetMode == target.CertManager
	err := s.progress.step("Building the binaries of target "+s.target.Name, func() (err error) {
		req.Images, err = s.target.Binaries(ctx, s.progress.writer())
		return err
	})
	return req, err
}
