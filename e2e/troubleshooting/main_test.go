// Package troubleshooting is the troubleshooting suite (`make e2e-troubleshooting`): the
// operator installed in automatic mode with the chart's defaults, then T1–T12 of CATALOG.md
// §T, one after the other. Each scenario injects its fault, asserts the symptom and the
// doctor's diagnosis, applies the documented fix and restores the release for the next one;
// T4 and T5 bring their own external-mode release. Reports go to _output/e2e/troubleshooting.
//
// The operator logs at its most verbose level (mostVerbose): its cert-controller reads,
// generates and rewrites the serving Secret, tls.key included, again and again here (T3, T10,
// T11), and no scenario of this suite depends on log volume or latency, so S1 checks that no
// log level, however verbose, writes key material.
package troubleshooting

import (
	"os"
	"testing"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"

	// Every cluster provider, chosen with --provider (PROVIDER).
	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/troubleshooting"
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers"
)

// mostVerbose is the most verbose --zap-log-level (chart value logLevel) accepts: n > 0 becomes
// zap level int8(-n), so 128 is the lowest level there is (logr's V(n) asks zap for at most
// V(127)), and 129 would wrap around to a level above fatal. client-go logs request and
// response bodies from V(8), whole ones from V(10).
const mostVerbose = 128

var troubleshootingSuite = suite.New(suite.Spec{
	Name:     "troubleshooting",
	Release:  &chart.Release{Mode: chart.Automatic, Values: map[string]any{"logLevel": mostVerbose}},
	Features: troubleshooting.Features(),
})

func TestMain(m *testing.M) { os.Exit(troubleshootingSuite.Run(m)) }

func TestTroubleshooting(t *testing.T) { troubleshootingSuite.Test(t) }
