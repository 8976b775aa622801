package suite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers"
)

func feature(id string, modes ...string) types.Feature {
	b := features.New("does something").WithLabel(LabelScenario, id)
	for _, m := range modes {
		b = b.WithLabel(LabelCertMode, m)
	}
	return b.Assess("it holds", func(ctx context.Context, _ *testing.T, _ *envconf.Config) context.Context { return ctx }).Feature()
}

func ids(fs []types.Feature) string {
	var out []string
	for _, f := range fs {
		out = append(out, scenarioID(f))
	}
	return strings.Join(out, " ")
}

func TestProviderChoice(t *testing.T) {
	for provider, want := range map[string]string{
		"minikube": `unknown provider "minikube" (want one of existing, kind, local)`,
	} {
		o := options{provider: provider, output: t.TempDir()}
		err := o.complete("x")
		require.ErrorContains(t, err, want, "--provider=%s: expected an error containing %q, saw %v", provider, want, err)
	}
	o := options{provider: cluster.DefaultProvider, output: t.TempDir()}
	err := o.complete("autocert")
	require.NoError(t, err, "--provider=local: expected a per-run cluster name e2e-autocert-<pid>, saw %q (%v)", o.clusterName, err)
	assert.True(t, strings.HasPrefix(o.clusterName, "e2e-autocert-"), "--provider=local: expected a per-run cluster name e2e-autocert-<pid>, saw %q (%v)", o.clusterName, err)
	kept := options{provider: cluster.DefaultProvider, output: t.TempDir(), keepCluster: true}
	err = kept.complete("autocert")
	require.NoError(t, err, "KEEP_CLUSTER=1: expected the stable name e2e-autocert (so the next run reuses it), saw %q (%v)", kept.clusterName, err)
	assert.Equal(t, "e2e-autocert", kept.clusterName, "KEEP_CLUSTER=1: expected the stable name e2e-autocert (so the next run reuses it), saw %q (%v)", kept.clusterName, err)
	named := options{provider: cluster.DefaultProvider, output: t.TempDir(), keepCluster: true}
	require.NoError(t, named.complete("selfManaged"))
	assert.Equal(t, "e2e-selfmanaged", named.clusterName, "--suite-name=selfManaged: a cluster name in lower case, as kind's node names must be")
}

func TestOperatorCoverageOnlyWhereTheProviderCollectsIt(t *testing.T) {
	for _, provider := range []string{"kind", "existing"} {
		o := options{provider: provider, output: t.TempDir(), coverDir: t.TempDir()}
		err := o.complete("autocert")
		require.EqualError(t, err, "--cover-dir: operator coverage is collected on the local provider only (the operator's processes write it on the host when they exit); run with --provider=local, or drop --cover-dir (COVER=1)", "--provider=%s", provider)
	}
	o := options{provider: "local", output: t.TempDir(), coverDir: t.TempDir()}
	require.NoError(t, o.complete("autocert"))
	assert.Equal(t, "autocert", filepath.Base(o.coverDir), "one coverage directory per suite")
}

func TestScenariosAreSelectedByCertMode(t *testing.T) {
	all := []types.Feature{feature("C1", "automatic"), feature("C7", "cert-manager"), feature("A1"), feature("C9", "external", "olm")}
	for mode, want := range map[chart.CertMode]string{
		chart.Automatic:   "C1 A1",
		chart.CertManager: "C7 A1",
		chart.OLM:         "A1 C9",
	} {
		s := &Suite{spec: Spec{Release: &chart.Release{Mode: mode}, Features: all}}
		got := ids(s.selected())
		assert.Equal(t, want, got, "suite in %s mode: expected scenarios %q, saw %q", mode, want, got)
	}
	got := ids((&Suite{spec: Spec{Features: all}}).selected())
	assert.Equal(t, "A1", got, "suite without a release: expected only scenarios without a certmode label (A1), saw %q", got)
}

func TestEveryScenarioNeedsOneID(t *testing.T) {
	noID := features.New("unlabelled").Feature()
	err := checkIDs([]types.Feature{noID})
	require.ErrorContains(t, err, `feature "unlabelled" has no scenario label`, "expected a feature without an ID to be rejected by name, saw %v", err)
	err = checkIDs([]types.Feature{feature("A1"), feature("A1")})
	require.ErrorContains(t, err, "scenario A1 appears twice", "expected a duplicate ID to be rejected, saw %v", err)
}

func TestLabelsSelectLikeE2EFramework(t *testing.T) {
	cfg := envconf.New().WithLabels(map[string][]string{LabelScenario: {"C1", "A7"}})
	s := &Suite{cfg: cfg}
	for id, want := range map[string]bool{"C1": true, "A7": true, "C2": false} {
		got := s.labelsSelect(feature(id))
		assert.Equal(t, want, got, "--labels=scenario=C1,scenario=A7: scenario %s selected = %t, expected %t", id, got, want)
	}
	s.cfg = envconf.New().WithSkipLabels(map[string][]string{LabelScenario: {"C1"}})
	assert.False(t, s.labelsSelect(feature("C1")), "--skip-labels=scenario=C1: expected C1 skipped and C2 selected")
	assert.True(t, s.labelsSelect(feature("C2")), "--skip-labels=scenario=C1: expected C1 skipped and C2 selected")
}

func TestFeatureNamesStartWithTheirID(t *testing.T) {
	f := &recordedFeature{inner: feature("C3")}
	assert.Equal(t, "C3 does something", f.Name(), "expected the test name to start with the ID (for -run), saw %q", f.Name())
	already := &recordedFeature{inner: features.New("C3 regenerates").WithLabel(LabelScenario, "C3").Feature()}
	assert.Equal(t, "C3 regenerates", already.Name(), "expected a name that starts with its ID to be kept, saw %q", already.Name())
	steps := f.Steps()
	assert.Len(t, f.Steps(), len(steps), "expected the wrapped steps to be built once (1 assessment), saw %d assessments", f.assessments)
	assert.Equal(t, 1, f.assessments, "expected the wrapped steps to be built once (1 assessment), saw %d assessments", f.assessments)
	assert.Equal(t, types.LevelSetup, steps[0].Level(), "expected the suite's own steps to open (setup) and close (teardown) the feature")
	assert.Equal(t, types.LevelTeardown, steps[len(steps)-1].Level(), "expected the suite's own steps to open (setup) and close (teardown) the feature")
}

func TestClearingTheOutputKeepsOnlyThisRunsLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "autocert")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "artifacts", "C1"), 0o750))
	for _, f := range []string{report.SummaryFile, "go-test.log"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600))
	}

	require.NoError(t, clearOutputDir(dir, filepath.Join(dir, "go-test.log")))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "go-test.log", entries[0].Name())

	require.NoError(t, clearOutputDir(dir, filepath.Join(t.TempDir(), "go-test.log")), "a log elsewhere")
	assert.NoDirExists(t, dir)
}

func TestReleaseStepHandsTheStepTheClusterAndTheRelease(t *testing.T) {
	c, r := &Cluster{name: "c"}, &chart.Release{Name: "r"}
	ctx := context.WithValue(context.WithValue(context.Background(), clusterKey{}, c), releaseKey{}, r)
	type mark struct{}
	var gotC *Cluster
	var gotR *chart.Release
	out := ReleaseStep(func(ctx context.Context, _ *testing.T, c *Cluster, r *chart.Release) context.Context {
		gotC, gotR = c, r
		return context.WithValue(ctx, mark{}, true)
	})(ctx, t, &envconf.Config{})
	assert.Same(t, c, gotC, "the cluster in the context")
	assert.Same(t, r, gotR, "the release in the context")
	assert.Equal(t, true, out.Value(mark{}), "the step's context is the step func's")
}

// Neighbours with the same at-once label run together; the same label further on starts a
// group of its own, and a feature without the label runs alone.
func TestAtOnceGroupsAreRunsOfNeighbours(t *testing.T) {
	atOnce := func(id, group string) types.Feature {
		return features.New("waits").WithLabel(LabelScenario, id).WithLabel(LabelAtOnce, group).
			Assess("it holds", func(ctx context.Context, _ *testing.T, _ *envconf.Config) context.Context { return ctx }).Feature()
	}
	var got []string
	for _, g := range atOnceGroups([]types.Feature{
		feature("M1"), atOnce("M4", "failovers"), atOnce("M5", "failovers"), atOnce("M12", "failovers"),
		feature("M6"), feature("M7"), atOnce("X1", "other"), atOnce("X2", "failovers"),
	}) {
		got = append(got, ids(g))
	}
	assert.Equal(t, []string{"M1", "M4 M5 M12", "M6", "M7", "X1", "X2"}, got)
}
