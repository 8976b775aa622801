package leases

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// stopKind is how B goes away in a failover measurement.
type stopKind string

const (
	killed   stopKind = "killed (SIGKILL, no cleanup)"
	graceful stopKind = "stopped gracefully (scaled to 0)"
	// sigkilled is kill -9 of a running process: its connections are refused from that
	// instant (killed freezes first, so until the kill they hang).
	sigkilled stopKind = "killed with kill -9 (SIGKILL while running, no cleanup)"
	// frozen is a process that stops running and stays: its Lease is no longer renewed and
	// every webhook call sent to it hangs until the API server's timeoutSeconds.
	frozen stopKind = "frozen (SIGSTOP: it neither renews its Lease nor answers)"
)

// failover is one measured takeover of team-a by A after B went away.
type failover struct {
	how     stopKind
	timings chart.LeaseTimings
	// stoppedAt is when the stop was asked for (stopped.asked).
	stoppedAt time.Time
	// stopEffective is by when the stop had surely taken effect (stopped.effective).
	stopEffective time.Time
	pod           string
	// leaseBefore was read just before B was stopped, leaseAfter once B's pod was gone.
	leaseBefore, leaseAfter *coordinationv1.Lease
	// leaseReleased is the last version of the Lease before B deleted it, nil when it was
	// not deleted. A stopping B keeps renewing until it releases (the chart's preStop delay
	// keeps it serving for shutdownDelaySeconds), so this is the Lease it gave up.
	leaseReleased *coordinationv1.Lease
	// first is the first probe sent after stoppedAt that A denied; elapsed is from stoppedAt
	// until its answer: how long users waited for A to validate team-a again.
	first   probe
	elapsed time.Duration
	// takeover is from stoppedAt until A's first "namespace re-included" line about team-a
	// (0 when there is none, or it has no time): when A started validating team-a again. The
	// answers can come much later: a frozen B holds every webhook call sent to it until the
	// API server's timeoutSeconds.
	takeover time.Duration
	probes   []probe
	// aVerdicts and bVerdicts are A's and B's `validate create` results by probe name;
	// reincluded counts A's "namespace re-included: lock Lease <why>" lines about team-a that
	// appeared during the measurement, by why (expired, deleted).
	aVerdicts, bVerdicts map[string][]string
	reincluded           map[string]int
	// admitted counts the invalid probes admitted between B going away and A's first denial.
	admitted int
	// released is when B's stopped pod logged that it released its Lease (zero when it did
	// not): a pod killed with kill -9 must not have, unless its SIGTERM came first.
	released time.Time
}

// measureFailover stops B (how), probes B's namespace until A denies an invalid object there,
// and brings B back. The checks are the caller's.
func (b restricted) measureFailover(ctx context.Context, t *testing.T, c *suite.Cluster, how stopKind, prefix string) failover {
	t.Helper()
	a := b.a
	ns := b.rel.RestrictedNamespace()
	timings, err := chart.LeaseTimingsOf(b.rel)
	expect.NoError(t, err, "reading the lease timings of %s", b)
	b.settled(ctx, t, c)

	aRestarts := restarts(ctx, t, c, a)
	defer expectNoRestarts(ctx, t, c, a, aRestarts)
	aLog, bLog := a.follow(ctx, c), b.follow(ctx, c)
	defer aLog.stop()
	defer bLog.stop()
	pr := startProber(ctx, c, ns, prefix)
	defer pr.stop()
	expect.Eventually(ctx, t, "the first probes of team-a to be answered", observeTimeout, func(context.Context) (bool, string, error) {
		n := len(pr.answered())
		return n >= 3, fmt.Sprintf("%d answered", n), nil
	})
	before := reinclusions(aLog.entries(), ns)
	// B renews every renewInterval; stopping it at a random point of that cycle makes the
	// repetitions sample the whole range the failover time can take.
	_ = poll.Sleep(ctx, "a random point of B's renew cycle to stop B at", rand.N(timings.RenewInterval)) //nolint:gosec // G404: samples the renew cycle; nothing secret

	f := failover{how: how, timings: timings, leaseBefore: readLease(ctx, t, c, ns)}
	released := watchRelease(ctx, t, c, f.leaseBefore)
	var st stopped
	switch how {
	case killed:
		st = b.kill(ctx, t, c)
	case graceful:
		st = b.stop(ctx, t, c)
	case sigkilled:
		st = b.sigkill(ctx, t, c)
	case frozen:
		st = b.freeze(ctx, t, c)
	}
	f.pod, f.stoppedAt, f.stopEffective = st.pod, st.asked, st.effective
	f.leaseAfter = readLease(ctx, t, c, ns)

	wait := timings.FailoverWindow() + failoverSlack + 30*time.Second
	expect.Eventually(ctx, t, fmt.Sprintf("%s to deny an invalid DynamoGraphDeployment in %s after B was %s", a, ns, how), wait,
		func(context.Context) (bool, string, error) {
			probes := pr.answered()
			v := verdicts(aLog.entries(), ns)
			_, ok := firstDenied(probes, v, f.stoppedAt)
			return ok, fmt.Sprintf("A's view of the probes since B went away: %s (A's logs read: %s)", describeProbes(since(probes, f.stoppedAt), v), aLog.pods()), nil
		})
	f.probes = pr.stop()
	f.leaseReleased = released() // A has taken over: B's deletion, if any, came before
	entries := logsCaughtUp(ctx, aLog, ns, f.probes)
	f.aVerdicts = verdicts(entries, ns)
	bEntries := bLog.entries()
	f.bVerdicts = verdicts(bEntries, ns)
	f.released = releasedAt(bEntries, f.pod)
	f.first, _ = firstDenied(f.probes, f.aVerdicts, f.stoppedAt)
	f.elapsed = f.first.done.Sub(f.stoppedAt)
	if at := firstReinclusion(entries, ns, f.stoppedAt); !at.IsZero() {
		f.takeover = at.Sub(f.stoppedAt)
	}
	for _, p := range since(f.probes, f.stoppedAt) {
		if p.err == "" && p.sent.Before(f.first.done) {
			f.admitted++
		}
	}
	after := reinclusions(entries, ns)
	f.reincluded = map[string]int{}
	for why, n := range after {
		f.reincluded[why] = n - before[why]
	}
	t.Logf("B %s at %s; A denied probe %s (sent %+.2fs, answered %+.2fs); %d invalid probes admitted in between; A's view since: %s", how,
		f.stoppedAt.Format(time.RFC3339Nano), f.first.name, f.first.sent.Sub(f.stoppedAt).Seconds(), f.elapsed.Seconds(), f.admitted,
		describeProbes(since(f.probes, f.stoppedAt), f.aVerdicts))

	if how == frozen {
		b.removeFrozen(ctx, t, c, f.pod)
	}
	b.start(ctx, t, c)
	return f
}

// releasedAt is the time of pod's "released the namespace lock Lease" line, zero when it has
// none.
func releasedAt(entries []logEntry, pod string) time.Time {
	for _, e := range entries {
		if e.Pod == pod && e.Msg == msgReleased {
			return e.Time.Time
		}
	}
	return time.Time{}
}

// firstReinclusion is the time of A's earliest "namespace re-included" line about ns at or after
// since; zero when there is none or it carries no time.
func firstReinclusion(entries []logEntry, ns string, since time.Time) time.Time {
	var first time.Time
	for _, e := range entries {
		if !strings.HasPrefix(e.Msg, msgReincluded) || e.Namespace != ns || e.Time.Before(since) {
			continue
		}
		if first.IsZero() || e.Time.Before(first) {
			first = e.Time.Time
		}
	}
	return first
}

// reinclusions counts A's "namespace re-included: lock Lease <why>" lines about ns by why.
func reinclusions(entries []logEntry, ns string) map[string]int {
	out := map[string]int{}
	for _, e := range entries {
		if why, ok := strings.CutPrefix(e.Msg, msgReincluded); ok && e.Namespace == ns {
			out[why]++
		}
	}
	return out
}

func since(probes []probe, t time.Time) []probe {
	var out []probe
	for _, p := range probes {
		if !p.sent.Before(t) {
			out = append(out, p)
		}
	}
	return out
}

// activeUntil is when the Lease stops excluding its namespace: renewTime + leaseDuration +
// gracePeriod, as documented.
func activeUntil(l *coordinationv1.Lease, timings chart.LeaseTimings) time.Time {
	d := timings.Duration
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return l.Spec.RenewTime.Add(d + timings.GracePeriod)
}

// checkCommon holds for every failover: no invalid object admitted, A skipped team-a while B
// held it, and A took over within leaseDuration + gracePeriod + 2 s.
func checkCommon(t *testing.T, f failover, ns string) {
	t.Helper()
	// B validates team-a until it goes away, A once it took over: at both ends an invalid
	// object is rejected. In between — the documented window — it is admitted unvalidated.
	for _, p := range f.probes {
		if p.err == "" && (p.done.Before(f.stoppedAt) || !p.sent.Before(f.first.done)) {
			expect.Errorf(t, "expected every invalid DynamoGraphDeployment in %s to be rejected while B held it and once A took over; probe %s (sent %+.2fs after B was %s) was admitted",
				ns, p.name, p.sent.Sub(f.stoppedAt).Seconds(), f.how)
			break
		}
	}
	if want := dynamo.DeniedBy(dynamo.GraphDeploymentValidatingWebhook); !strings.Contains(f.first.err, want) {
		expect.Errorf(t, "expected the API server to answer probe %s, the first one A denied, with %q; it said %q", f.first.name, want, f.first.err)
	}
	var validatedEarly []string
	for _, p := range f.probes {
		if p.done.Before(f.stoppedAt) && validatedBy(f.aVerdicts[p.name]) {
			validatedEarly = append(validatedEarly, fmt.Sprintf("%s (%s)", p.name, strings.Join(f.aVerdicts[p.name], "+")))
		}
	}
	if len(validatedEarly) > 0 {
		expect.Errorf(t, "expected operator A to skip %s while B held its Lease; A validated %d probes: %s", ns, len(validatedEarly), firstN(validatedEarly, 5))
	}
	bound := f.timings.FailoverWindow() + failoverSlack
	switch {
	case f.how == frozen && f.takeover > bound:
		// The answers wait for the frozen B's webhook calls to time out; A's log says when it
		// took over.
		expect.Errorf(t, "expected operator A to validate %s again within leaseDuration + gracePeriod + 2s = %s after B was %s (%s); A logged %q after %.2fs (its first denial, of probe %s, was answered after %.2fs)",
			ns, bound, f.how, f.timings, msgReincluded+"…", f.takeover.Seconds(), f.first.name, f.elapsed.Seconds())
	case f.how != frozen && f.elapsed > bound:
		expect.Errorf(t, "expected operator A to deny an invalid DynamoGraphDeployment in %s within leaseDuration + gracePeriod + 2s = %s after B was %s (%s); the first denial came after %.2fs (probe %s)",
			ns, bound, f.how, f.timings, f.elapsed.Seconds(), f.first.name)
	}
}

// checkKilled: a killed B leaves its Lease, unrenewed, and A waits until it is no longer
// active (renewTime + leaseDuration + gracePeriod) — not a moment less.
func checkKilled(t *testing.T, f failover, ns string) {
	t.Helper()
	l := f.leaseAfter
	if l == nil || holderOf(l) != f.pod || l.Spec.RenewTime == nil || l.Spec.RenewTime.After(f.stopEffective) {
		released := ""
		if !f.released.IsZero() {
			released = fmt.Sprintf("; the pod logged %q at %s, %+.2fs from the kill", msgReleased, f.released.Format(time.RFC3339Nano), f.released.Sub(f.stoppedAt).Seconds())
		}
		expect.Errorf(t, "expected the killed pod %s to leave Lease %s/%s behind, unrenewed since it was killed (asked at %s, in effect by %s); saw %s%s",
			f.pod, ns, release.NamespaceLockLease, f.stoppedAt.Format(time.RFC3339Nano), f.stopEffective.Format(time.RFC3339Nano), describeLease(l), released)
		return
	}
	until := activeUntil(l, f.timings)
	if f.first.done.Before(until) {
		expect.Errorf(t, "expected operator A to skip %s until B's Lease stopped being active at %s (renewTime %s + leaseDuration + gracePeriod %s); A denied probe %s already %.2fs before that",
			ns, until.Format(time.RFC3339Nano), l.Spec.RenewTime.Format(time.RFC3339Nano), f.timings.GracePeriod, f.first.name, until.Sub(f.first.done).Seconds())
		return
	}
	for _, p := range f.probes {
		if !p.sent.Before(f.stoppedAt) && p.done.Before(until) && validatedBy(f.aVerdicts[p.name]) {
			expect.Errorf(t, "expected operator A to skip %s while the killed B's Lease was active (until %s); A validated probe %s answered %.2fs before",
				ns, until.Format(time.RFC3339Nano), p.name, until.Sub(p.done).Seconds())
			break
		}
	}
	if f.reincluded["expired"] < 1 {
		expect.Errorf(t, "expected operator A to log %q about %s after B was killed; its new re-inclusion lines: %v",
			msgReincluded+"expired", ns, f.reincluded)
	}
}

// checkFrozen: a frozen B keeps its Lease, unrenewed, and A takes over once it is no longer
// active — judged by A's log line re-including the namespace, since the answers also wait for
// the frozen B's webhook calls to time out.
func checkFrozen(t *testing.T, f failover, ns string) {
	t.Helper()
	l := f.leaseAfter
	if l == nil || holderOf(l) != f.pod || l.Spec.RenewTime == nil || l.Spec.RenewTime.After(f.stopEffective) {
		expect.Errorf(t, "expected the frozen pod %s to keep Lease %s/%s, unrenewed since it was frozen (asked at %s, in effect by %s); saw %s",
			f.pod, ns, release.NamespaceLockLease, f.stoppedAt.Format(time.RFC3339Nano), f.stopEffective.Format(time.RFC3339Nano), describeLease(l))
		return
	}
	if f.takeover == 0 {
		expect.Errorf(t, "expected operator A to log %q with a time (ts) about %s after B was frozen, to tell when it took over; saw none (re-inclusion lines: %v)",
			msgReincluded+"expired", ns, f.reincluded)
		return
	}
	until := activeUntil(l, f.timings)
	if at := f.stoppedAt.Add(f.takeover); at.Before(until) {
		expect.Errorf(t, "expected operator A to skip %s until the frozen B's Lease stopped being active at %s (renewTime %s + leaseDuration + gracePeriod %s); A re-included it %.2fs before that",
			ns, until.Format(time.RFC3339Nano), l.Spec.RenewTime.Format(time.RFC3339Nano), f.timings.GracePeriod, until.Sub(at).Seconds())
	}
	if f.reincluded["expired"] < 1 {
		expect.Errorf(t, "expected operator A to log %q about %s after B was frozen; its new re-inclusion lines: %v",
			msgReincluded+"expired", ns, f.reincluded)
	}
}

// checkGraceful: a B stopped gracefully deletes its Lease and A takes over at once, well
// before the Lease would have expired.
func checkGraceful(t *testing.T, f failover, ns string) {
	t.Helper()
	if f.leaseAfter != nil && holderOf(f.leaseAfter) == f.pod {
		expect.Errorf(t, "expected B's graceful stop to delete Lease %s/%s; after pod %s was gone it still exists: %s",
			ns, release.NamespaceLockLease, f.pod, describeLease(f.leaseAfter))
	}
	if f.reincluded["deleted"] < 1 {
		expect.Errorf(t, "expected operator A to log %q about %s after B stopped; its new re-inclusion lines: %v",
			msgReincluded+"deleted", ns, f.reincluded)
	}
	l := f.leaseReleased
	if l == nil {
		expect.Errorf(t, "expected B's graceful stop to delete Lease %s/%s; no deletion was seen (before the stop: %s)",
			ns, release.NamespaceLockLease, describeLease(f.leaseBefore))
		return
	}
	if l.Spec.RenewTime != nil {
		if until := activeUntil(l, f.timings); !f.first.done.Before(until) {
			expect.Errorf(t, "expected operator A to take %s over as soon as B released its Lease, before it would have expired at %s (%s); the first denial came %.2fs after that",
				ns, until.Format(time.RFC3339Nano), describeLease(l), f.first.done.Sub(until).Seconds())
		}
	}
}

// failoverFeature builds M4 and M5: repetitions with the topology's timings on a restricted
// operator of the scenario's own (so that M4, M5 and M12 run at once), and with the full plan
// one more with the chart's defaults. That one upgrades A, so it waits until no scenario
// running at once relies on A's pods (aRollouts), and it stops B, whose lease timings the
// topology upgrades with A's.
func (s *scenarios) failoverFeature(id, name string, how stopKind, check func(*testing.T, failover, string)) types.Feature {
	prefix := strings.ToLower(id)
	own := s.ownOperator(id)
	measure := func(ctx context.Context, t *testing.T, c *suite.Cluster, b restricted, label string) failover {
		ns := b.rel.RestrictedNamespace()
		f := b.measureFailover(ctx, t, c, how, prefix+"-"+label)
		checkCommon(t, f, ns)
		check(t, f, ns)
		return f
	}
	return features.New(name).
		WithLabel(suite.LabelScenario, id).
		WithLabel(suite.LabelAtOnce, failoversAtOnce).
		Setup(s.installOwn(own)).
		Assess("with short lease timings, repeatedly", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.aRollouts.RLock()
			defer s.aRollouts.RUnlock()
			c := suite.ClusterFrom(ctx, t)
			t.Cleanup(func() { own.restore(ctx, t) })
			timings, err := s.topo.LeaseTimings()
			expect.NoError(t, err, "reading the lease timings of the topology")
			var secs []float64
			var admitted []int
			for i := range s.plan.Repetitions {
				f := measure(ctx, t, c, own, fmt.Sprint(i))
				secs = append(secs, round3(f.elapsed.Seconds()))
				admitted = append(admitted, f.admitted)
				t.Logf("repetition %d/%d: A took %s over %.2fs after B was %s", i+1, s.plan.Repetitions, own.rel.RestrictedNamespace(), f.elapsed.Seconds(), how)
			}
			noteFailovers(ctx, t, "short", timings, secs)
			suite.Note(ctx, t, "shortAdmittedUnvalidated", admitted)
			return ctx
		}).
		Assess("with the chart's default lease timings, once", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if !s.plan.DefaultTimings {
				// Not expect.Skipf: the other assessment decides the outcome, and a failure
				// message should not carry this note.
				t.Skipf("the %s plan measures only with short timings (the full plan adds the defaults)", s.plan)
			}
			s.aRollouts.Lock()
			t.Cleanup(s.aRollouts.Unlock) // after the timings are back (cleanups run last first)
			c := suite.ClusterFrom(ctx, t)
			t.Cleanup(func() { s.opB().restore(ctx, t) })
			short, err := s.topo.LeaseTimings()
			expect.NoError(t, err, "reading the lease timings of the topology")
			defaults := chart.DefaultLeaseTimings()
			s.setTimings(ctx, t, c, defaults)
			t.Cleanup(func() { s.setTimings(ctx, t, c, short) })
			f := measure(ctx, t, c, s.opB(), "defaults")
			noteFailovers(ctx, t, "default", defaults, []float64{round3(f.elapsed.Seconds())})
			suite.Note(ctx, t, "defaultAdmittedUnvalidated", f.admitted)
			return ctx
		}).
		Teardown(uninstallOwn(own)).
		Feature()
}

func (s *scenarios) setTimings(ctx context.Context, t *testing.T, c *suite.Cluster, l chart.LeaseTimings) {
	t.Helper()
	start := time.Now()
	if err := s.topo.UpgradeLeaseTimings(ctx, c.Installer(), l, recoverTimeout); err != nil {
		expect.Fatalf(t, "upgrading both releases to %s: %v", l, err)
	}
	t.Logf("both operators run with %s (upgrade took %.1fs)", l, time.Since(start).Seconds())
}

// noteFailovers puts the measured failover times and their bound into summary.json.
func noteFailovers(ctx context.Context, t *testing.T, which string, l chart.LeaseTimings, secs []float64) {
	t.Helper()
	if len(secs) == 0 {
		return
	}
	sorted := slices.Sorted(slices.Values(secs))
	suite.Note(ctx, t, which+"Timings", l.String())
	suite.Note(ctx, t, which+"FailoverSeconds", secs)
	suite.Note(ctx, t, which+"FailoverMinSeconds", sorted[0])
	suite.Note(ctx, t, which+"FailoverMedianSeconds", round3(median(sorted)))
	suite.Note(ctx, t, which+"FailoverMaxSeconds", sorted[len(sorted)-1])
	suite.Note(ctx, t, which+"BoundSeconds", (l.FailoverWindow() + failoverSlack).Seconds())
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func firstN(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(", … (%d more)", len(items)-n)
}

// killFailover is M4.
func (s *scenarios) killFailover() types.Feature {
	return s.failoverFeature("M4", "a killed restricted operator's namespace is validated by the cluster-wide one after leaseDuration + gracePeriod", killed, checkKilled)
}

// gracefulFailover is M5.
func (s *scenarios) gracefulFailover() types.Feature {
	return s.failoverFeature("M5", "a restricted operator stopped gracefully deletes its Lease and the cluster-wide one takes over at once", graceful, checkGraceful)
}

// watchRelease watches the Lease from its version before (nil: no Lease) and returns a func
// that stops watching and gives the last version seen before the Lease was deleted — nil when
// it was not deleted.
func watchRelease(ctx context.Context, t *testing.T, c *suite.Cluster, before *coordinationv1.Lease) func() *coordinationv1.Lease {
	t.Helper()
	if before == nil {
		return func() *coordinationv1.Lease { return nil }
	}
	d := watchDeletion(ctx, t, c, before)
	return func() *coordinationv1.Lease {
		d.stop()
		_, last := d.result()
		return last
	}
}
