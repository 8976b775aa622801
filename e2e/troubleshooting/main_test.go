// Package troubleshooting is the troubleshooting suite (`make e2e-troubleshooting`): the
// operator installed in automatic mode with the chart's defaults, then T1–T12 of CATALOG.md
// §T, one after the other. Each scenario injects its fault, asserts the symptom and the
// doctor's diagnosis, applies the documented fix and restores the release for the next one;
// T4 and T5 bring their own external-mode release. Reports go to _output/e2e/troubleshooting.
package troubleshooting

import (
	"os"
	"testing"

	"github.com/gauntlet-dev/gauntlet/scenarios/install"
	"github.com/gauntlet-dev/gauntlet/scenarios/suite"

	// Every cluster provider, chosen with --provider (PROVIDER).
	_ "github.com/gauntlet-dev/gauntlet/scenarios/cluster/providers"
	"github.com/gauntlet-dev/gauntlet/scenarios/troubleshooting"
)

var troubleshootingSuite = suite.New(suite.Spec{
	Name:     "troubleshooting",
	Release:  &install.Release{Mode: install.Automatic},
	Features: troubleshooting.Features(),
})

func TestMain(m *testing.M) { os.Exit(troubleshootingSuite.Run(m)) }

func TestTroubleshooting(t *testing.T) { troubleshootingSuite.Test(t) }
