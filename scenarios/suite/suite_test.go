package suite

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/install"

	_ "github.com/gauntlet-dev/gauntlet/scenarios/cluster/providers"
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
		if err := o.complete("x"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--provider=%s: expected an error containing %q, saw %v", provider, want, err)
		}
	}
	o := options{provider: DefaultProvider, output: t.TempDir()}
	if err := o.complete("autocert"); err != nil || !strings.HasPrefix(o.clusterName, "e2e-autocert-") {
		t.Errorf("--provider=local: expected a per-run cluster name e2e-autocert-<pid>, saw %q (%v)", o.clusterName, err)
	}
	kept := options{provider: DefaultProvider, output: t.TempDir(), keepCluster: true}
	if err := kept.complete("autocert"); err != nil || kept.clusterName != "e2e-autocert" {
		t.Errorf("KEEP_CLUSTER=1: expected the stable name e2e-autocert (so the next run reuses it), saw %q (%v)", kept.clusterName, err)
	}
}

func TestScenariosAreSelectedByCertMode(t *testing.T) {
	all := []types.Feature{feature("C1", "automatic"), feature("C7", "cert-manager"), feature("A1"), feature("C9", "external", "olm")}
	for mode, want := range map[install.CertMode]string{
		install.Automatic:   "C1 A1",
		install.CertManager: "C7 A1",
		install.OLM:         "A1 C9",
	} {
		s := &Suite{spec: Spec{Release: &install.Release{Mode: mode}, Features: all}}
		if got := ids(s.selected()); got != want {
			t.Errorf("suite in %s mode: expected scenarios %q, saw %q", mode, want, got)
		}
	}
	if got := ids((&Suite{spec: Spec{Features: all}}).selected()); got != "A1" {
		t.Errorf("suite without a release: expected only scenarios without a certmode label (A1), saw %q", got)
	}
}

func TestEveryScenarioNeedsOneID(t *testing.T) {
	noID := features.New("unlabelled").Feature()
	if err := checkIDs([]types.Feature{noID}); err == nil || !strings.Contains(err.Error(), `feature "unlabelled" has no scenario label`) {
		t.Errorf("expected a feature without an ID to be rejected by name, saw %v", err)
	}
	if err := checkIDs([]types.Feature{feature("A1"), feature("A1")}); err == nil || !strings.Contains(err.Error(), "scenario A1 appears twice") {
		t.Errorf("expected a duplicate ID to be rejected, saw %v", err)
	}
}

func TestLabelsSelectLikeE2EFramework(t *testing.T) {
	cfg := envconf.New().WithLabels(map[string][]string{LabelScenario: {"C1", "A7"}})
	s := &Suite{cfg: cfg}
	for id, want := range map[string]bool{"C1": true, "A7": true, "C2": false} {
		if got := s.labelsSelect(feature(id)); got != want {
			t.Errorf("--labels=scenario=C1,scenario=A7: scenario %s selected = %t, expected %t", id, got, want)
		}
	}
	s.cfg = envconf.New().WithSkipLabels(map[string][]string{LabelScenario: {"C1"}})
	if s.labelsSelect(feature("C1")) || !s.labelsSelect(feature("C2")) {
		t.Error("--skip-labels=scenario=C1: expected C1 skipped and C2 selected")
	}
}

func TestFeatureNamesStartWithTheirID(t *testing.T) {
	f := &recordedFeature{inner: feature("C3")}
	if f.Name() != "C3 does something" {
		t.Errorf("expected the test name to start with the ID (for -run), saw %q", f.Name())
	}
	already := &recordedFeature{inner: features.New("C3 regenerates").WithLabel(LabelScenario, "C3").Feature()}
	if already.Name() != "C3 regenerates" {
		t.Errorf("expected a name that starts with its ID to be kept, saw %q", already.Name())
	}
	steps := f.Steps()
	if len(f.Steps()) != len(steps) || f.assessments != 1 {
		t.Errorf("expected the wrapped steps to be built once (1 assessment), saw %d assessments", f.assessments)
	}
	if steps[0].Level() != types.LevelSetup || steps[len(steps)-1].Level() != types.LevelTeardown {
		t.Error("expected the suite's own steps to open (setup) and close (teardown) the feature")
	}
}
