// Package multioperator is the multi-operator lease topology suite (`make e2e-multi-operator`):
// operator A cluster-wide in platform-system, operator B restricted to team-a, tenant team-b,
// both with short lease timings, then every §M scenario. Reports go to _output/e2e/multioperator.
//
// --failover-plan (env GAUNTLET_FAILOVER_PLAN) picks how thoroughly M4/M5 and P5 measure:
// "quick" (the default, what `make test` runs: two repetitions with short timings, one P5 run of
// each way of stopping B), "full" (five repetitions and one with the chart's default timings,
// ≈ 30 s failover; ten P5 runs of each, the three ways at once) or "compare" (P5's ten runs of
// each at once and one after another, their medians compared; the rest as in quick).
package multioperator

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/leases"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"

	// Every cluster provider, chosen with --provider (PROVIDER).
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers"
)

// shortTimings make a killed restricted operator's namespace fail over within 8 s, so the
// failover scenarios can repeat their measurement.
var shortTimings = chart.LeaseTimings{Duration: 6 * time.Second, RenewInterval: 2 * time.Second, GracePeriod: 2 * time.Second}

const suiteName = "multioperator"

var (
	topology = newTopology()
	plan     = leases.QuickPlan
	multi    = suite.New(suite.Spec{
		Name:    suiteName,
		Release: topology.Restricted,
		// The cluster-wide release goes first: it installs the CRDs the restricted one does not.
		BeforeInstall: func(ctx context.Context, c *suite.Cluster, _ *chart.Release) error {
			return topology.InstallClusterWide(ctx, c.Installer(), 3*time.Minute)
		},
		Features: leases.Features(topology, &plan),
	})
)

func newTopology() *release.Topology {
	t := release.NewTopology(shortTimings)
	t.NamespaceLabels = map[string]string{suite.LabelSuite: suiteName}
	return t
}

func init() {
	flag.Var(&plan, "failover-plan", "How thoroughly M4/M5 and P5 measure failover: quick (2 repetitions, short timings; 1 P5 run of each kill -9, SIGTERM, freeze), full (5 repetitions plus one with the default timings; 10 P5 runs of each) or compare (10 P5 runs of each at once and one after another, medians compared) (env GAUNTLET_FAILOVER_PLAN).")
	if v := os.Getenv("GAUNTLET_FAILOVER_PLAN"); v != "" {
		if err := plan.Set(v); err != nil {
			fmt.Fprintf(os.Stderr, "GAUNTLET_FAILOVER_PLAN: %v\n", err)
			os.Exit(2)
		}
	}
}

func TestMain(m *testing.M) { os.Exit(multi.Run(m)) }

func TestMultiOperator(t *testing.T) { multi.Test(t) }
