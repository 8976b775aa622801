package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chainsaw"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// LabelRunner marks the rows another test runner runs: RunnerChainsaw on a target's Chainsaw
// tests, so `--labels=runner=chainsaw` selects them all (and `--labels=scenario=<target>/<test>`
// one of them).
const LabelRunner = "runner"

// RunnerChainsaw is LabelRunner's value on a target's Chainsaw tests.
const RunnerChainsaw = "chainsaw"

// chainsawTimeout bounds one Chainsaw test, its cleanup included.
const chainsawTimeout = 10 * time.Minute

// chainsawFeatures are the rows of the target's Chainsaw tests (package chainsaw): one feature
// each, ID <target>/<test>, run after the W checks in every certificate mode.
func (s *Suite) chainsawFeatures() ([]types.Feature, error) {
	tests, err := chainsaw.Discover(s.target.Dir())
	if err != nil {
		return nil, err
	}
	feats := make([]types.Feature, 0, len(tests))
	for _, ct := range tests {
		feats = append(feats, features.New(ct.Title()).
			WithLabel(LabelScenario, ct.ID(s.target.Name)).
			WithLabel(LabelRunner, RunnerChainsaw).
			Assess("Chainsaw runs "+ct.Name, s.runChainsaw(ct)).
			Feature())
	}
	return feats, nil
}

// chainsawSelected says whether this run selects a Chainsaw row: only then is Chainsaw built.
func (s *Suite) chainsawSelected() bool {
	for _, f := range s.selected() {
		if s.labelsSelect(f) && f.Labels().Contains(LabelRunner, RunnerChainsaw) {
			return true
		}
	}
	return false
}

// buildChainsaw builds the pinned Chainsaw before the cluster is made. A failed build fails the
// Chainsaw rows alone, each with the build's error and the pinned version: the W checks still
// run.
func (s *Suite) buildChainsaw(ctx context.Context) {
	if s.target == nil || !s.chainsawSelected() {
		return
	}
	root, err := workspace.Root()
	if err != nil {
		s.chainsawErr = err
		return
	}
	version, _ := chainsaw.PinnedVersion(root)
	_ = s.progress.step("Building Chainsaw "+version+" for target "+s.target.Name+"'s Chainsaw tests", func() error {
		s.chainsaw, s.chainsawErr = chainsaw.Build(ctx, root, s.progress.writer())
		return s.chainsawErr
	})
}

// runChainsaw runs one Chainsaw test against the installed target, with its names as bindings,
// and reports what Chainsaw's report says. A test Chainsaw cannot load is a broken test, not a
// failed check (report.BrokenKey). A row that did not pass keeps Chainsaw's report, output and
// the values it was given under its artifacts, in chainsaw/.
func (s *Suite) runChainsaw(ct chainsaw.Test) types.StepFunc {
	return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		id := ct.ID(s.target.Name)
		Note(ctx, t, "chainsawTest", ct.File)
		if s.chainsawErr != nil {
			expect.Fatalf(t, "%v", s.chainsawErr)
		}
		it := TargetFrom(ctx, t)
		c := ClusterFrom(ctx, t)
		var webhooks []string
		for _, w := range it.Served.Webhooks {
			webhooks = append(webhooks, w.Name)
		}
		b := chainsaw.Bindings{Target: it.Target.Name, Mode: it.Mode, Namespace: it.Namespace, Release: it.Target.Chart.Release,
			Service: it.Served.Service, Secret: it.Served.Secret, Deployment: it.Served.Deployment, Webhooks: webhooks}
		dir := t.TempDir()
		runCtx, cancel := context.WithTimeout(ctx, chainsawTimeout)
		defer cancel()
		res, err := chainsaw.Runner{Binary: s.chainsaw, Kubeconfig: c.KubeconfigPath()}.Run(runCtx, ct, b, dir)
		if err != nil || res.Outcome != chainsaw.Passed {
			if kept, cerr := keepChainsawFiles(dir, filepath.Join(s.artifactsDir(id), "chainsaw")); cerr != nil {
				t.Logf("keeping Chainsaw's files of %s: %v", id, cerr)
			} else {
				t.Logf("Chainsaw's report and output: %s", kept)
			}
		}
		switch {
		case err != nil:
			expect.Fatalf(t, "%v", err)
		case res.Outcome == chainsaw.Broken:
			Note(ctx, t, report.BrokenKey, true)
			expect.Errorf(t, "broken test: %s", res.Message)
		case res.Outcome == chainsaw.Failed:
			expect.Errorf(t, "expected Chainsaw test %s to pass; %s", ct.Name, res.Message)
		case res.Outcome == chainsaw.Skipped:
			expect.Skipf(t, "Chainsaw test %s: %s", ct.Name, res.Message)
		}
		return ctx
	}
}

// keepChainsawFiles copies what Chainsaw wrote into dir (report, output, values) into to.
func keepChainsawFiles(dir, to string) (string, error) {
	if err := os.MkdirAll(to, 0o750); err != nil {
		return "", err
	}
	for _, name := range []string{chainsaw.ReportFile, chainsaw.OutputFile, chainsaw.ValuesFile} {
		data, err := os.ReadFile(filepath.Join(dir, name)) //nolint:gosec // G304: a file this run wrote
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(to, name), data, 0o600); err != nil { //nolint:gosec // G703: the row's artifacts directory and a file name of this package
			return "", fmt.Errorf("keeping %s: %w", name, err)
		}
	}
	return to, nil
}
