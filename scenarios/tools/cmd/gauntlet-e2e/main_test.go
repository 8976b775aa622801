package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

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
