package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/conformance"
)

func TestATargetsModesRunBesideTheSuitesReportingUnderTheTarget(t *testing.T) {
	gatekeeper := conformance.TargetRun{
		Path:   "/src/scenarios/targets/gatekeeper/target.yaml",
		Target: &target.Target{Name: "gatekeeper", CertModes: target.CertModes{SelfManaged: &target.CertMode{}, CertManager: &target.CertMode{}}},
		Out:    "/out/conformance/gatekeeper",
	}
	rs := runsOf([]string{"autocert", "hostile"}, []conformance.TargetRun{gatekeeper}, "/out/e2e")

	assert.Equal(t, []string{"gatekeeper/selfManaged", "gatekeeper/certManager", "autocert", "hostile"}, rs.names,
		"the modes first: with no recorded times, the runs start in this order")
	assert.Equal(t, "/out/e2e/hostile", rs.dir("hostile"))
	assert.Equal(t, "/out/conformance/gatekeeper/certManager", rs.dir("gatekeeper/certManager"))
	assert.True(t, rs.conformance(), "a target's modes run the conformance suite")

	suiteArgs := []string{"--provider=local", "--e2e-output=/out/e2e"}
	command := rs.command("/src", "30m", suiteArgs)
	assert.Equal(t, []string{"go", "test", "-count=1", "-v", "-timeout", "30m", "./e2e/hostile", "-args", "--provider=local", "--e2e-output=/out/e2e"},
		command(context.Background(), "hostile").Args)
	args := command(context.Background(), "gatekeeper/certManager").Args
	assert.Equal(t, []string{"go", "test", "-count=1", "-v", "-timeout", "30m", "./e2e/conformance", "-args", "--provider=local", "--e2e-output=/out/e2e"}, args[:10],
		"the conformance suite, with every suite's arguments first")
	assert.Equal(t, gatekeeper.Args("certManager"), args[10:], "the target's own last, so that its --e2e-output is the one taken")
	assert.Equal(t, []string{"--provider=local", "--e2e-output=/out/e2e"}, suiteArgs)
}

func TestWithoutTargetsOrTheConformanceSuiteChainsawIsNotNeeded(t *testing.T) {
	assert.False(t, runsOf([]string{"autocert", "hostile"}, nil, "/out").conformance())
	assert.True(t, runsOf([]string{"autocert", "conformance"}, nil, "/out").conformance())
}

func TestATargetFailsTheRunOnlyForWhatItsDescriptionDoesNotDeclare(t *testing.T) {
	out := t.TempDir()
	tr := conformance.TargetRun{
		Target: &target.Target{Name: "gatekeeper", CertModes: target.CertModes{SelfManaged: &target.CertMode{}},
			Divergences: []target.Divergence{{Check: "W13", Why: "it closes kept-alive connections early", Link: "https://example.org/w13"}}},
		Out: out,
	}
	summary := func(w1 string) string {
		return `{"suite":"selfManaged","provider":"local","kubernetesVersion":"v1.37.2","startedAt":"2026-12-01T10:00:00Z","seconds":1,"scenarios":[` +
			`{"id":"W1","title":"installs","result":"` + w1 + `","seconds":1,"details":{"message":"expected the Deployment Available; saw 0 of 3 ready"}},` +
			`{"id":"W13","title":"stops gracefully","result":"failed","seconds":1,"details":{"message":"a review was not answered"}}]}`
	}
	require.NoError(t, os.MkdirAll(tr.Dir("selfManaged"), 0o750))

	require.NoError(t, os.WriteFile(filepath.Join(tr.Dir("selfManaged"), report.SummaryFile), []byte(summary("passed")), 0o600))
	var b strings.Builder
	unexpected, err := reportTargets(&b, []conformance.TargetRun{tr})
	require.NoError(t, err)
	assert.False(t, unexpected, "the mode's suite failed W13, which the description declares: %s", b.String())
	assert.Contains(t, b.String(), "| ⚠️ |")

	require.NoError(t, os.WriteFile(filepath.Join(tr.Dir("selfManaged"), report.SummaryFile), []byte(summary("failed")), 0o600))
	b.Reset()
	unexpected, err = reportTargets(&b, []conformance.TargetRun{tr})
	require.NoError(t, err)
	assert.True(t, unexpected)
	assert.Contains(t, b.String(), "FAILED: target gatekeeper, cells its description does not declare:\n  ✗ gatekeeper W1 selfManaged (local, v1.37.2): ❌ expected the Deployment Available; saw 0 of 3 ready\n")
	assert.FileExists(t, filepath.Join(out, "report.md"))
}
