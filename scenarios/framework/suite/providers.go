package suite

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// DefaultKubernetesVersion is the version clusters run unless --kubernetes-version says otherwise.
const DefaultKubernetesVersion = workspace.KubernetesVersion

// DefaultOperatorVersion is stamped into the operator when neither --operator-version nor
// GAUNTLET_OPERATOR_VERSION says otherwise.
const DefaultOperatorVersion = "v0.0.0-e2e"

// options are a suite run's settings: flags, with environment variables as defaults so that
// `make e2e-… PROVIDER=… KEEP_CLUSTER=1` and plain `go test` agree.
type options struct {
	provider          string
	kubernetesVersion string
	keepCluster       bool
	operatorVersion   string
	output            string
	clusterName       string
	coverDir          string
	// stressArg is --stress as given; stress is its value once complete has read it.
	stressArg string
	stress    int
	// target and targetMode name what a suite of targets installs (Spec.Targets).
	target, targetMode string
	// name replaces the suite's own name in its reports, output directory and cluster: one
	// suite run several ways at once (a target in each of its modes) needs a name for each.
	name string
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.provider, "provider", envOr("GAUNTLET_PROVIDER", cluster.DefaultProvider), "Cluster provider: local, kind or existing (env GAUNTLET_PROVIDER).")
	fs.StringVar(&o.kubernetesVersion, "kubernetes-version", envOr("K8S_VERSION", DefaultKubernetesVersion), "Kubernetes version of the cluster (env K8S_VERSION).")
	fs.BoolVar(&o.keepCluster, "keep-cluster", os.Getenv("KEEP_CLUSTER") == "1", "Keep the cluster after the suite and reuse it next time (env KEEP_CLUSTER=1).")
	fs.StringVar(&o.operatorVersion, "operator-version", envOr("GAUNTLET_OPERATOR_VERSION", DefaultOperatorVersion), "Version stamped into the operator under test (env GAUNTLET_OPERATOR_VERSION).")
	fs.StringVar(&o.output, "e2e-output", os.Getenv("GAUNTLET_E2E_OUTPUT"), "Directory of the suites' reports (default <workspace>/_output/e2e; env GAUNTLET_E2E_OUTPUT).")
	fs.StringVar(&o.clusterName, "cluster-name", "", "Cluster name (default e2e-<suite>, plus -<pid> unless the cluster is kept).")
	fs.StringVar(&o.coverDir, "cover-dir", os.Getenv("GAUNTLET_COVER_DIR"), "Run a coverage-instrumented operator whose processes write their counters into DIR/<suite> (local provider only; env GAUNTLET_COVER_DIR; make e2e COVER=1).")
	fs.StringVar(&o.name, "suite-name", "", "This run's name in reports, its output directory and its cluster (default the suite's own), for one suite run several ways at once.")
	fs.StringVar(&o.target, "target", envOr("GAUNTLET_TARGET", DefaultTarget), "Suites of targets: the target to install, a name under scenarios/targets or a path (env GAUNTLET_TARGET; make TARGET=…).")
	fs.StringVar(&o.targetMode, "target-mode", os.Getenv("GAUNTLET_TARGET_MODE"), "Suites of targets: its certificate mode, selfManaged, certManager or external (default the target's first; env GAUNTLET_TARGET_MODE).")
	fs.StringVar(&o.stressArg, "stress", os.Getenv("GAUNTLET_STRESS"), "Run N CPU-bound worker processes beside the suite, from before the cluster's creation to its last check (default 0; env GAUNTLET_STRESS; make e2e STRESS=N).")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// complete fills the derived defaults and rejects unknown values.
func (o *options) complete(suite string) error {
	provider, err := cluster.Lookup(o.provider)
	if err != nil {
		return err
	}
	n, err := ParseStress(o.stressArg)
	if err != nil {
		return fmt.Errorf("--stress (env GAUNTLET_STRESS, make STRESS=N): %w", err)
	}
	o.stress = n
	if o.coverDir != "" {
		if !provider.OperatorCoverage {
			covering := strings.Join(cluster.NamesWith(func(p cluster.Provider) bool { return p.OperatorCoverage }), " or ")
			return fmt.Errorf("--cover-dir: operator coverage is collected on the %s provider only (the operator's processes write it on the host when they exit); run with --provider=%s, or drop --cover-dir (COVER=1)", covering, covering)
		}
		if o.keepCluster {
			return errors.New("--cover-dir with --keep-cluster: a kept cluster's operator never exits, so its coverage is never written; drop one of them (COVER=1 or KEEP_CLUSTER=1)")
		}
		// One directory per suite, so a report can say which suite reached a line.
		abs, err := filepath.Abs(filepath.Join(o.coverDir, suite))
		if err != nil {
			return fmt.Errorf("--cover-dir %q: %w", o.coverDir, err)
		}
		if err := os.MkdirAll(abs, 0o750); err != nil {
			return fmt.Errorf("--cover-dir: %w", err)
		}
		o.coverDir = abs
	}
	if o.clusterName == "" {
		// Lower case: a cluster name becomes host and container names (kind's nodes), which
		// refuse capitals, and a suite's name may have them (--suite-name=selfManaged).
		o.clusterName = "e2e-" + strings.ToLower(suite)
		if !o.keepCluster {
			// Two runs of one suite (make test and make e2e) may overlap.
			o.clusterName += "-" + strconv.Itoa(os.Getpid()%100000)
		}
	}
	if o.output == "" {
		root, err := workspace.Root()
		if err != nil {
			return fmt.Errorf("locating _output/e2e: %w (or pass --e2e-output)", err)
		}
		o.output = filepath.Join(root, "_output", "e2e")
	}
	return nil
}

// startCluster asks the chosen provider for the suite's cluster (what req says it needs, under
// the names and versions o gives) and connects to it.
func startCluster(ctx context.Context, o options, req cluster.Request, pr *progress) (*Cluster, bool, error) {
	provider, err := cluster.Lookup(o.provider)
	if err != nil {
		return nil, false, err
	}
	req.Name, req.KubernetesVersion, req.OperatorVersion = o.clusterName, o.kubernetesVersion, o.operatorVersion
	req.Keep, req.CoverDir = o.keepCluster, o.coverDir
	req.Progress, req.Step = pr.writer(), pr.step
	h, err := provider.Start(ctx, req)
	if err != nil {
		return nil, false, err
	}
	c, err := newCluster(o.clusterName, o.provider, o.operatorVersion, h, pr.printf)
	if err != nil {
		if !h.Reused {
			_ = h.Backend.Destroy(context.WithoutCancel(ctx))
		}
		return nil, false, err
	}
	return c, h.Reused, nil
}
