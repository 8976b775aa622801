// Package hostile is the hostile-input suite (`make e2e-hostile`): the operator installed with
// the chart's defaults (automatic certificates), then H1–H7 of CATALOG.md §H — requests the API
// server never sends (malformed, wrongly typed, huge, slow, the wrong method, content type or
// TLS) to every path the operator serves, directly to its pod and through its Service. Each
// scenario asserts a bounded, clear answer per request, and that the operator held: the same
// pod, no restart, memory under a bound, admission and conversion working afterwards. Reports
// go to _output/e2e/hostile.
package hostile

import (
	"os"
	"testing"

	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/hostile"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"

	// Every cluster provider, chosen with --provider (PROVIDER).
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers"
)

var hostileSuite = suite.New(suite.Spec{
	Name:     "hostile",
	Release:  &chart.Release{Mode: chart.Automatic},
	Features: hostile.Features(),
})

func TestMain(m *testing.M) { os.Exit(hostileSuite.Run(m)) }

func TestHostile(t *testing.T) { hostileSuite.Test(t) }
