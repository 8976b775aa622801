// Package leases holds the multi-operator lease scenarios (CATALOG.md §M) as e2e-framework
// features labelled scenario=<ID>. They run against release.Topology: operator A cluster-wide
// in platform-system, operator B restricted to team-a and holding the Lease
// dynamo-operator-ns-lock there, tenant team-b served by A alone. M4, M5 and M12 each install a
// restricted operator with B's values of their own, and run at once (suite.LabelAtOnce); P5
// installs three more for its own runs, so that its kinds of stop run at once.
//
// Who validated or mutated an object is observed, never inferred: each operator's
// `validate create` / `default` log lines (with their result, "skipped" when the LeaseAware
// decorator stepped back), its dynamo_webhook_requests_total counters scraped from its pods
// through the API server's pod proxy, and what the API server answered the user.
package leases

import (
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
)

// Plan says how thoroughly the failover and hand-over scenarios (M4, M5, M12, P5) measure. It is a flag.Value
// ("quick" or "full"), so a suite can let the command line choose; the features read it when
// they run, after flags are parsed.
type Plan struct {
	// Repetitions of each failover measurement with the topology's (short) lease timings.
	Repetitions int
	// DefaultTimings adds one measurement with the chart's default timings (≈ 30 s failover):
	// both releases are upgraded for it and back afterwards.
	DefaultTimings bool
	// DistributionRuns is how often P5 measures each way of stopping a restricted operator
	// (kill -9, SIGTERM, freeze) with the topology's short timings; the three ways run at once.
	DistributionRuns int
	// CompareSequential has P5 measure the three ways one after another as well, and check
	// that running them at once does not shift their medians.
	CompareSequential bool
	// HandoverCycles is how often M12 stops and starts B under probes.
	HandoverCycles int
	name           string
}

// Plans a suite can pick by name.
var (
	// QuickPlan is what `make test` runs: two repetitions with short timings, one P5 run of
	// each way of stopping B, and two M12 stops and starts.
	QuickPlan = Plan{Repetitions: 2, DistributionRuns: 1, HandoverCycles: 2, name: "quick"}
	// FullPlan is what `make e2e-multi-operator` runs: five repetitions with short timings and
	// one with the defaults, ten P5 runs of each way of stopping B, and ten M12 stops and
	// starts.
	FullPlan = Plan{Repetitions: 5, DefaultTimings: true, DistributionRuns: 10, HandoverCycles: 10, name: "full"}
	// ComparePlan checks P5's overlap: its ten runs of each way at once and ten more one way
	// after another, their medians compared; every other scenario as in QuickPlan.
	ComparePlan = Plan{Repetitions: 2, DistributionRuns: 10, CompareSequential: true, HandoverCycles: 2, name: "compare"}
)

// String names the plan.
func (p *Plan) String() string {
	if p == nil || p.name == "" {
		return QuickPlan.name
	}
	return p.name
}

// Set picks a plan by name.
func (p *Plan) Set(name string) error {
	switch name {
	case QuickPlan.name:
		*p = QuickPlan
	case FullPlan.name:
		*p = FullPlan
	case ComparePlan.name:
		*p = ComparePlan
	default:
		return fmt.Errorf("unknown failover plan %q (want %s, %s or %s)", name, QuickPlan.name, FullPlan.name, ComparePlan.name)
	}
	return nil
}

// Features are the §M scenarios for topology topo, which the suite installs (topo.Restricted
// is the suite's release). plan is read when the failover scenarios run.
func Features(topo *release.Topology, plan *Plan) []types.Feature {
	s := &scenarios{topo: topo, plan: plan}
	return []types.Feature{
		s.leaseHeld(),            // M1
		s.whoValidates(),         // M2
		s.configurations(),       // M3
		s.reconciled(),           // M10, while the topology is as installed
		s.killFailover(),         // M4, M5 and M12 at once (failoversAtOnce)
		s.gracefulFailover(),     // M5
		s.handoverWindows(),      // M12
		s.comesBack(),            // M6
		s.mutationSkipped(),      // M7
		s.leasePermissions(),     // M8
		s.uncertifiedStop(),      // M9
		s.fatalExits(),           // M11
		s.failoverDistribution(), // P5
	}
}

// scenarios carries the topology into every feature.
type scenarios struct {
	topo *release.Topology
	plan *Plan
	// aRollouts orders the scenarios that run at once around rollouts of A: each holds it
	// shared while it relies on A's pods staying as they are (installing its restricted
	// operator, measuring), and an upgrade of A's lease timings holds it alone, since A's new
	// pods would void every measurement running meanwhile (expectNoRestarts).
	aRollouts sync.RWMutex
}

// failoversAtOnce is the suite.LabelAtOnce of M4, M5 and M12: each stops and starts a restricted
// operator of its own (installed in ownNamespaces) and mostly waits for Leases, so they run
// at once.
const failoversAtOnce = "failovers"

// ownNamespaces are the namespaces of the restricted operators M4, M5 and M12 install for
// themselves, with B's values, by scenario ID.
var ownNamespaces = map[string]string{"M4": "m4-kill", "M5": "m5-stop", "M12": "m12-handover"}

// ownOperator is the restricted operator scenario id stops: a release with B's values in the
// scenario's namespace of ownNamespaces, named "B-<id>" in messages.
func (s *scenarios) ownOperator(id string) restricted {
	return restrictedOperator("B-"+id, s.topo.RestrictedIn(ownNamespaces[id]), s.opA())
}

// Timeouts of the scenarios' own waits; the failover bounds themselves come from the lease
// timings.
const (
	// recoverTimeout bounds bringing B back and the topology settling (pod start, readiness,
	// Lease, A's exclusion) on a loaded machine.
	recoverTimeout = 3 * time.Minute
	// observeTimeout bounds waiting for a log line or counter to show a request just made.
	observeTimeout = 20 * time.Second
	// failoverSlack is the documented tolerance on top of leaseDuration + gracePeriod.
	failoverSlack = 2 * time.Second
	// probeEvery is the probing period of the failover measurements: their resolution.
	probeEvery = 200 * time.Millisecond
)
