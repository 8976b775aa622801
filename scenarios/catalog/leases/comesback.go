package leases

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// comesBack is M6: B is killed, A takes team-a over, B comes back and A backs off again. Over
// the whole cycle every probe of team-a is looked up in both operators' logs: no stretch
// validated by neither may last longer than the documented window (leaseDuration +
// gracePeriod, + 2 s of measurement slack), and both may validate only once B was started
// again, for at most M12's bound (B validates before it takes its Lease back).
func (s *scenarios) comesBack() types.Feature {
	return features.New("a restricted operator that comes back takes its namespace back; no admission is validated by neither operator for longer than documented, nor by both but briefly as it comes back").
		WithLabel(suite.LabelScenario, "M6").
		Assess("kill B, let A take over, start B again: who validated each probe", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			t.Cleanup(func() { s.opB().restore(ctx, t) })
			a, b := s.opA(), s.opB()
			ns := b.rel.RestrictedNamespace()
			timings, err := s.topo.LeaseTimings()
			expect.NoError(t, err, "reading the lease timings of the topology")
			s.opB().settled(ctx, t, c)

			aRestarts := restarts(ctx, t, c, a)
			defer expectNoRestarts(ctx, t, c, a, aRestarts)
			aLog, bLog := a.follow(ctx, c), b.follow(ctx, c)
			defer aLog.stop()
			defer bLog.stop()
			pr := startProber(ctx, c, ns, "m6")
			defer pr.stop()
			expect.Eventually(ctx, t, "the first probes of team-a to be answered", observeTimeout, func(context.Context) (bool, string, error) {
				n := len(pr.answered())
				return n >= 5, fmt.Sprintf("%d answered", n), nil
			})

			killedAt := s.opB().kill(ctx, t, c).asked
			var takenOver probe
			expect.Eventually(ctx, t, fmt.Sprintf("%s to take %s over after B was killed", a, ns), timings.FailoverWindow()+failoverSlack+30*time.Second,
				func(context.Context) (bool, string, error) {
					probes := pr.answered()
					v := verdicts(aLog.entries(), ns)
					var ok bool
					takenOver, ok = firstDenied(probes, v, killedAt)
					return ok, fmt.Sprintf("A's view of the probes since B was killed: %s (A's logs read: %s)", describeProbes(since(probes, killedAt), v), aLog.pods()), nil
				})
			expect.Eventually(ctx, t, "a few more probes answered while A validates "+ns, observeTimeout, func(context.Context) (bool, string, error) {
				n := len(since(pr.answered(), takenOver.done))
				return n >= 3, fmt.Sprintf("%d answered", n), nil
			})

			startedAt := time.Now()
			s.opB().scale(ctx, t, c, 1)
			newPod := s.opB().settled(ctx, t, c)
			expect.Eventually(ctx, t, fmt.Sprintf("B's new pod %s to deny probes of %s", newPod, ns), observeTimeout,
				func(context.Context) (bool, string, error) {
					probes := pr.answered()
					v := verdicts(bLog.entries(), ns)
					first, ok := firstDenied(probes, v, startedAt)
					if !ok {
						return false, fmt.Sprintf("B's view of the probes since it was started: %s (B's logs read: %s)", describeProbes(since(probes, startedAt), v), bLog.pods()), nil
					}
					// A few more probes after B's first denial show A staying out.
					return len(since(probes, first.done)) >= 5, "", nil
				})
			probes := pr.stop()
			vA := verdicts(logsCaughtUp(ctx, aLog, ns, probes), ns)
			// B validates the last probes (it is back); its lines may trail its answers too.
			vB := verdicts(logsCaughtUp(ctx, bLog, ns, probes[max(0, len(probes)-3):]), ns)

			bothBound := b.bothBound(t)
			var admitted []string
			byA, byB, byBoth := 0, 0, 0
			for _, p := range probes {
				if p.err == "" {
					admitted = append(admitted, p.name)
				}
				inA, inB := validatedBy(vA[p.name]), validatedBy(vB[p.name])
				if inA {
					byA++
				}
				if inB {
					byB++
				}
				if inA && inB {
					byBoth++
				}
			}
			runs, both := validatorRuns(probes, vA, vB)
			windows := spans(runs)
			suite.Note(ctx, t, "timings", timings.String())
			suite.Note(ctx, t, "probes", len(probes))
			suite.Note(ctx, t, "validatedByA", byA)
			suite.Note(ctx, t, "validatedByB", byB)
			suite.Note(ctx, t, "validatedByBoth", byBoth)
			suite.Note(ctx, t, "bothWindowsSeconds", spans(both))
			suite.Note(ctx, t, "neitherWindowsSeconds", windows)
			suite.Note(ctx, t, "admittedUnvalidated", len(admitted))
			t.Logf("killed B at %s, started it again at %s: %d probes, %d validated by A, %d by B, %d by both; stretches validated by neither: %v s",
				killedAt.Format(time.RFC3339Nano), startedAt.Format(time.RFC3339Nano), len(probes), byA, byB, byBoth, windows)

			expectEveryProbeLogged(t, a, aLog, ns, probes, vA)
			for _, r := range both {
				if r.first.sent.Before(startedAt) {
					expect.Errorf(t, "expected %s to be validated by both operators only once B was started again; %d probes from %s (sent %+.2fs after B was killed) to %s were: %s",
						ns, r.count, r.first.name, r.first.sent.Sub(killedAt).Seconds(), r.last.name, describeRun(r, probes, vA, vB))
				} else if r.span() > bothBound {
					expect.Errorf(t, "expected %s to be validated by both operators for at most B's drain timeout + %s = %s when B comes back; %d probes from %s to %s were, for %.2fs",
						ns, bothSlack, bothBound, r.count, r.first.name, r.last.name, r.span().Seconds())
				}
			}
			bound := timings.FailoverWindow() + failoverSlack
			for _, r := range runs {
				if r.span() > bound {
					expect.Errorf(t, "expected %s to be validated by neither operator for at most leaseDuration + gracePeriod + 2s = %s (%s); %d probes from %s (sent %+.2fs after B was killed) to %s went unvalidated for %.2fs",
						ns, bound, timings, r.count, r.first.name, r.first.sent.Sub(killedAt).Seconds(), r.last.name, r.span().Seconds())
				}
			}
			last := probes[max(0, len(probes)-3):]
			for _, p := range last {
				if validatedBy(vA[p.name]) || !validatedBy(vB[p.name]) {
					expect.Errorf(t, "expected A to back off again once B was back: the last probes validated by B alone; probe %s: A %v, B %v",
						p.name, vA[p.name], vB[p.name])
				}
			}
			return ctx
		}).
		Feature()
}
