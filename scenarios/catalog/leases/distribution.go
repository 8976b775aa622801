package leases

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// distributionKind is one way P5 stops B: how, the prefix of its notes, and its own checks.
type distributionKind struct {
	how   stopKind
	key   string
	check func(*testing.T, failover, string)
}

// failoverDistribution is P5: the failover of team-a from B to A, measured over repeated runs
// of each way B can go away — kill -9, SIGTERM (a graceful stop), freeze — with the topology's
// short lease timings (the plan says how many runs). Each run is M4/M5's measurement
// (measureFailover) with its checks; P5 adds the distribution of A's takeover (its "namespace
// re-included" log line) — min/median/max against leaseDuration + gracePeriod —, when users
// saw it (the first denial's answer, which a frozen B delays by its hanging webhook calls),
// and the stretches in which team-a was validated by neither operator or by both, from both
// operators' logs.
func (s *scenarios) failoverDistribution() types.Feature {
	f := features.New("lease failover time over repeated kill -9, SIGTERM and freeze of the restricted operator, with the windows of zero or two validators").
		WithLabel(suite.LabelScenario, "P5")
	for _, k := range []distributionKind{
		{how: sigkilled, key: "kill", check: checkKilled},
		{how: graceful, key: "term", check: checkGraceful},
		{how: frozen, key: "freeze", check: checkFrozen},
	} {
		f = f.Assess(string(k.how)+", repeatedly", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.measureDistribution(ctx, t, k)
			return ctx
		})
	}
	return f.Feature()
}

// measureDistribution runs the plan's P5 runs of one kind, checks each and notes the results.
func (s *scenarios) measureDistribution(ctx context.Context, t *testing.T, k distributionKind) {
	t.Helper()
	c := suite.ClusterFrom(ctx, t)
	t.Cleanup(func() { s.restoreB(ctx, t) })
	ns := s.opB().rel.RestrictedNamespace()
	timings, err := s.topo.LeaseTimings()
	expect.NoError(t, err, "reading the lease timings of the topology")
	// A frozen B holds each webhook call until the API server gives up on it: the mutating and
	// then the validating call, timeoutSeconds each.
	hang := 2 * s.webhookTimeout(ctx, t, c)
	bound := timings.FailoverWindow() + failoverSlack

	var answered, takeover, neitherMax, bothMax []float64
	var admitted, bothProbes []int
	for i := range s.plan.DistributionRuns {
		f := s.measureFailover(ctx, t, c, k.how, fmt.Sprintf("p5-%s-%d", k.key, i))
		checkCommon(t, f, ns)
		k.check(t, f, ns)
		neither, both := validatorRuns(f.probes, f.aVerdicts, f.bVerdicts)
		n, b := maxSpan(neither), maxSpan(both)
		answered = append(answered, round3(f.elapsed.Seconds()))
		takeover = append(takeover, round3(f.takeover.Seconds()))
		neitherMax = append(neitherMax, round3(n.Seconds()))
		bothMax = append(bothMax, round3(b.Seconds()))
		admitted = append(admitted, f.admitted)
		count := 0
		for _, r := range both {
			count += r.count
		}
		bothProbes = append(bothProbes, count)
		t.Logf("P5 %s run %d/%d: A took %s over %.2fs after B was %s (answered after %.2fs); longest stretch validated by neither %.2fs, by both %.2fs (%d probes)",
			k.key, i+1, s.plan.DistributionRuns, ns, f.takeover.Seconds(), k.how, f.elapsed.Seconds(), n.Seconds(), b.Seconds(), count)

		// M6's rule, per run: no stretch validated by neither or by both lasts longer than
		// leaseDuration + gracePeriod (+ the measurement slack); a frozen B's stretch of
		// neither also holds each probe for its webhook calls' timeouts.
		nBound := bound
		if k.how == frozen {
			nBound += hang
		}
		for _, r := range neither {
			if r.span() > nBound {
				expect.Errorf(t, "run %d after B was %s: expected %s to be validated by neither operator for at most %s; %d probes from %s (sent %+.2fs after the stop) to %s went unvalidated for %.2fs",
					i+1, k.how, ns, nBound, r.count, r.first.name, r.first.sent.Sub(f.stoppedAt).Seconds(), r.last.name, r.span().Seconds())
			}
		}
		for _, r := range both {
			if r.span() > bound {
				expect.Errorf(t, "run %d after B was %s: expected %s to be validated by both operators for at most %s; %d probes from %s (sent %+.2fs after the stop) to %s were validated by both for %.2fs",
					i+1, k.how, ns, bound, r.count, r.first.name, r.first.sent.Sub(f.stoppedAt).Seconds(), r.last.name, r.span().Seconds())
			}
		}
	}
	noteFailovers(ctx, t, k.key, timings, takeover)
	suite.Note(ctx, t, k.key+"AnsweredSeconds", answered)
	suite.Note(ctx, t, k.key+"NeitherWindowMaxSeconds", neitherMax)
	suite.Note(ctx, t, k.key+"BothWindowMaxSeconds", bothMax)
	suite.Note(ctx, t, k.key+"ValidatedByBothProbes", bothProbes)
	suite.Note(ctx, t, k.key+"AdmittedUnvalidated", admitted)
}

// maxSpan is the longest span of runs, 0 without runs.
func maxSpan(runs []probeRun) time.Duration {
	var longest time.Duration
	for _, r := range runs {
		longest = max(longest, r.span())
	}
	return longest
}

// webhookTimeout is the timeoutSeconds of B's validating webhooks (the API server's limit on
// one call), from its configuration.
func (s *scenarios) webhookTimeout(ctx context.Context, t *testing.T, c *suite.Cluster) time.Duration {
	t.Helper()
	b := s.opB()
	cfg, err := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, b.rel.ValidatingName(), metav1.GetOptions{})
	expect.NoError(t, err, "getting ValidatingWebhookConfiguration %s of %s", b.rel.ValidatingName(), b)
	var longest int32
	for _, w := range cfg.Webhooks {
		if w.TimeoutSeconds != nil {
			longest = max(longest, *w.TimeoutSeconds)
		}
	}
	if longest == 0 {
		longest = 10 // the API server's default
	}
	return time.Duration(longest) * time.Second
}
