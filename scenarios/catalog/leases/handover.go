package leases

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// bothSlack is what M12 allows a hand-over's "validated by both" stretch beyond the stopping
// operator's drain: the served probe's interval, the Lease's way to A's watcher, and one
// probe's round trip on a loaded machine.
const bothSlack = 2 * time.Second

// bothBound is how long a hand-over may leave b's namespace validated by both operators: b's
// drain timeout (the chart's drainTimeoutSeconds) + bothSlack.
func (b restricted) bothBound(t *testing.T) time.Duration {
	t.Helper()
	drain, err := b.rel.DrainTimeout()
	expect.NoError(t, err, "reading %s's drain timeout", b)
	return drain + bothSlack
}

// expectEveryProbeLogged fails for each probe of ns that has no `validate create` line in A's
// log (vA): A's webhook is called for every namespace, so without the line nobody can tell who
// validated the probe.
func expectEveryProbeLogged(t *testing.T, a operator, aLog *logFollower, ns string, probes []probe, vA map[string][]string) {
	t.Helper()
	var missing []string
	for _, p := range probes {
		if len(vA[p.name]) == 0 {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		expect.Errorf(t, "expected a `validate create` line in %s's log for every probe of %s (A's webhook is called for every namespace); %d of %d have none: %s (logs read: %s)",
			a, ns, len(missing), len(probes), firstN(missing, 5), aLog.pods())
	}
}

// handover is one stop or start of B, from the moment it was asked for until the other side
// was seen validating again.
type handover struct {
	what     string // "stop 3", "start 3"
	from, to time.Time
}

// overlaps says whether stretch r falls (at least partly) into the hand-over.
func (h handover) overlaps(r probeRun) bool {
	return !r.last.done.Before(h.from) && !r.first.sent.After(h.to)
}

// during names the hand-over that stretch r falls into, or says it falls into none.
func during(handovers []handover, r probeRun) (handover, bool) {
	for _, h := range handovers {
		if h.overlaps(r) {
			return h, true
		}
	}
	return handover{}, false
}

// handoverWindows is M12: B is stopped (scaled to 0) and started (scaled to 1) again and
// again while team-a is probed every probeEvery. Each probe is looked up in both operators'
// logs. No probe may be validated by nobody — not while B starts (it takes its Lease only once
// the API server reaches its webhooks), not while it stops (it deletes its Lease before it
// drains). Both may validate a probe only during a hand-over, for at most B's drain timeout +
// bothSlack. B is a restricted operator of M12's own, so that it runs at once with M4 and M5.
func (s *scenarios) handoverWindows() types.Feature {
	own := s.ownOperator("M12")
	return features.New("no admission in a restricted operator's namespace is validated by nobody while the operator starts or stops; both operators validate it only for a bounded moment of each hand-over").
		WithLabel(suite.LabelScenario, "M12").
		WithLabel(suite.LabelAtOnce, failoversAtOnce).
		Setup(s.installOwn(own)).
		Assess("stop and start B again and again under probes: who validated each", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.aRollouts.RLock()
			defer s.aRollouts.RUnlock()
			c := suite.ClusterFrom(ctx, t)
			t.Cleanup(func() { own.restore(ctx, t) })
			a, b := own.a, own
			ns := b.rel.RestrictedNamespace()
			bothBound := b.bothBound(t)
			b.settled(ctx, t, c)

			aRestarts := restarts(ctx, t, c, a)
			defer expectNoRestarts(ctx, t, c, a, aRestarts)
			aLog, bLog := a.follow(ctx, c), b.follow(ctx, c)
			defer aLog.stop()
			defer bLog.stop()
			pr := startProber(ctx, c, ns, "m12")
			defer pr.stop()
			// seenValidating waits until op has denied a probe sent after after, and a few
			// more probes came back after that one; it returns when.
			seenValidating := func(op operator, log *logFollower, after time.Time, what string) time.Time {
				var first probe
				expect.Eventually(ctx, t, fmt.Sprintf("%s to validate %s's probes after %s", op, ns, what), recoverTimeout, func(context.Context) (bool, string, error) {
					probes := pr.answered()
					v := verdicts(log.entries(), ns)
					var ok bool
					if first, ok = firstDenied(probes, v, after); !ok {
						return false, fmt.Sprintf("%s's view of the probes since: %s (logs read: %s)", op, describeProbes(since(probes, after), v), log.pods()), nil
					}
					return len(since(probes, first.done)) >= 3, "", nil
				})
				return time.Now()
			}
			seenValidating(b.operator, bLog, time.Now().Add(-time.Second), "the start of the scenario")

			cycles := s.plan.HandoverCycles
			var handovers []handover
			for i := 1; i <= cycles; i++ {
				st := b.stop(ctx, t, c)
				handovers = append(handovers, handover{what: fmt.Sprintf("stop %d", i), from: st.asked,
					to: seenValidating(a, aLog, st.asked, fmt.Sprintf("B's stop %d", i))})
				startedAt := time.Now()
				b.start(ctx, t, c)
				handovers = append(handovers, handover{what: fmt.Sprintf("start %d", i), from: startedAt,
					to: seenValidating(b.operator, bLog, startedAt, fmt.Sprintf("B's start %d", i))})
			}
			probes := pr.stop()
			vA := verdicts(logsCaughtUp(ctx, aLog, ns, probes), ns)
			// B's lines trail its answers too; the last probes are B's (it is back).
			vB := verdicts(logsCaughtUp(ctx, bLog, ns, probes[max(0, len(probes)-3):]), ns)

			neither, both := validatorRuns(probes, vA, vB)
			nobodyAt, bothAt := map[string]float64{}, map[string]float64{}
			for _, r := range neither {
				h, ok := during(handovers, r)
				where := "outside any hand-over"
				if ok {
					where = h.what
					nobodyAt[h.what] += round3(r.span().Seconds())
				}
				expect.Errorf(t, "expected no probe of %s validated by nobody; %d probes from %s to %s (%s) went unvalidated for %.2fs: %s",
					ns, r.count, r.first.name, r.last.name, where, r.span().Seconds(), describeRun(r, probes, vA, vB))
			}
			for _, r := range both {
				h, ok := during(handovers, r)
				if !ok {
					expect.Errorf(t, "expected %s to be validated by both operators only during a hand-over; %d probes from %s to %s were validated by both outside any (%.2fs)",
						ns, r.count, r.first.name, r.last.name, r.span().Seconds())
					continue
				}
				bothAt[h.what] += round3(r.span().Seconds())
				if r.span() > bothBound {
					expect.Errorf(t, "expected %s to be validated by both operators for at most B's drain timeout + %s = %s at each hand-over; at %s, %d probes from %s to %s were, for %.2fs",
						ns, bothSlack, bothBound, h.what, r.count, r.first.name, r.last.name, r.span().Seconds())
				}
			}
			expectEveryProbeLogged(t, a, aLog, ns, probes, vA)

			var table []string
			var startBoth, stopBoth []float64
			for _, h := range handovers {
				table = append(table, fmt.Sprintf("%s: nobody %.2fs, both %.2fs", h.what, nobodyAt[h.what], bothAt[h.what]))
				if strings.HasPrefix(h.what, "start") {
					startBoth = append(startBoth, bothAt[h.what])
				} else {
					stopBoth = append(stopBoth, bothAt[h.what])
				}
			}
			suite.Note(ctx, t, "cycles", cycles)
			suite.Note(ctx, t, "probes", len(probes))
			suite.Note(ctx, t, "nobodySeconds", spans(neither))
			suite.Note(ctx, t, "bothSecondsAtStart", startBoth)
			suite.Note(ctx, t, "bothSecondsAtStop", stopBoth)
			suite.Note(ctx, t, "bothBoundSeconds", bothBound.Seconds())
			t.Logf("%d stops and starts of B, %d probes of %s every %s; validated by nobody: %d stretches; per hand-over:\n  %s",
				cycles, len(probes), ns, probeEvery, len(neither), strings.Join(table, "\n  "))
			return ctx
		}).
		Teardown(uninstallOwn(own)).
		Feature()
}

// describeRun says, for a stretch's probes, what the API server answered and what each
// operator logged.
func describeRun(r probeRun, probes []probe, vA, vB map[string][]string) string {
	var out []string
	in := false
	for _, p := range probes {
		if p.name == r.first.name {
			in = true
		}
		if in {
			answer := "admitted"
			if p.err != "" {
				answer = p.err
			}
			out = append(out, fmt.Sprintf("%s (A: %v, B: %v, answer: %s)", p.name, vA[p.name], vB[p.name], answer))
		}
		if p.name == r.last.name {
			break
		}
	}
	return firstN(out, 3)
}
