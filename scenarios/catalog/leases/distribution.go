package leases

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// distributionKind is one way P5 stops a restricted operator: how, the prefix of its notes,
// its own checks, and the restricted operators that share its runs.
type distributionKind struct {
	how   stopKind
	key   string
	check func(*testing.T, failover, string)
	// namespaces are those of the restricted operators that share the kind's runs, each taking
	// every len(namespaces)-th: "" is B's team-a; the others are installed for P5 with B's values.
	namespaces []string
}

// distributionKinds are P5's three ways of stopping a restricted operator. Each stops operators
// of its own, so that the three run at once: B in team-a is killed with kill -9, another is
// stopped with SIGTERM, and two more share the freezes — a frozen operator's run takes about
// three times another's, since A's first denial waits for the frozen webhook calls to time out.
var distributionKinds = []distributionKind{
	{how: sigkilled, key: "kill", check: checkKilled, namespaces: []string{""}},
	{how: graceful, key: "term", check: checkGraceful, namespaces: []string{"p5-term"}},
	{how: frozen, key: "freeze", check: checkFrozen, namespaces: []string{"p5-freeze-1", "p5-freeze-2"}},
}

// maxLateKills is how often in a row P5 redoes a kill -9 run whose kill came too late (the pod
// had handled its SIGTERM and released its Lease first) before it fails.
const maxLateKills = 3

// failoverDistribution is P5: the failover of a restricted operator's namespace to A, measured
// over repeated runs of each way it can go away — kill -9, SIGTERM (a graceful stop), freeze —
// with the topology's short lease timings (the plan says how many runs). The three ways run at
// once, each on restricted operators of its own (distributionKinds), since each run mostly
// waits for a Lease. Each run is M4/M5's measurement (measureFailover) with its checks; P5 adds
// the distribution of A's takeover (its "namespace re-included" log line) — min/median/max
// against leaseDuration + gracePeriod —, when users saw it (the first denial's answer, which a
// frozen operator delays by its hanging webhook calls), and the stretches in which the
// namespace was validated by neither operator or by both, from both operators' logs. The
// compare plan measures the three ways one after another as well, and checks that overlapping
// them does not shift the medians.
func (s *scenarios) failoverDistribution() types.Feature {
	var ops map[string]restricted // by namespace, from Setup on
	return features.New("lease failover time over repeated kill -9, SIGTERM and freeze of restricted operators, with the windows of zero or two validators").
		WithLabel(suite.LabelScenario, "P5").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ops = s.distributionOperators()
			installOthers(ctx, t, suite.ClusterFrom(ctx, t), ops)
			return ctx
		}).
		Assess("killed with kill -9, stopped gracefully and frozen at once, repeatedly", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			overlapped := s.distributions(ctx, t, ops, true)
			for _, k := range distributionKinds {
				overlapped[k.key].note(ctx, t, k.key)
			}
			if !s.plan.CompareSequential {
				return ctx
			}
			sequential := s.distributions(ctx, t, ops, false)
			for _, k := range distributionKinds {
				sequential[k.key].note(ctx, t, "sequential"+strings.ToUpper(k.key[:1])+k.key[1:])
				compareLayouts(t, k, sequential[k.key], overlapped[k.key])
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			uninstallOthers(ctx, t, suite.ClusterFrom(ctx, t), ops)
			return ctx
		}).
		Feature()
}

// distributionOperators are the restricted operators P5 stops, by namespace: B for "", and one
// with B's values in each other namespace of distributionKinds.
func (s *scenarios) distributionOperators() map[string]restricted {
	out := map[string]restricted{}
	for _, k := range distributionKinds {
		for _, ns := range k.namespaces {
			if ns == "" {
				out[ns] = s.opB()
				continue
			}
			out[ns] = restrictedOperator("B-"+strings.TrimPrefix(ns, "p5-"), s.topo.RestrictedIn(ns), s.opA())
		}
	}
	return out
}

// distributions measures every kind on its operators of ops the plan's number of times — at
// once, each operator in a subtest of its own started from its own goroutine (not t.Parallel,
// which runs no more subtests at once than -test.parallel, GOMAXPROCS by default: 2 on 2 cores),
// or one after another — and returns each kind's distribution.
func (s *scenarios) distributions(ctx context.Context, t *testing.T, ops map[string]restricted, overlap bool) map[string]distribution {
	t.Helper()
	layout := "one after another"
	if overlap {
		layout = "at once"
	}
	var mu sync.Mutex
	out := map[string]distribution{}
	t.Run(layout, func(t *testing.T) {
		var wg sync.WaitGroup
		for _, k := range distributionKinds {
			for share, ns := range k.namespaces {
				name := k.key
				if len(k.namespaces) > 1 {
					name = fmt.Sprintf("%s-%d", k.key, share+1)
				}
				measure := func() {
					t.Run(name, func(t *testing.T) {
						d := s.measureDistribution(ctx, t, ops[ns], k, share)
						mu.Lock()
						defer mu.Unlock()
						d.runs = append(d.runs, out[k.key].runs...)
						out[k.key] = d
					})
				}
				if !overlap {
					measure()
					continue
				}
				wg.Go(measure)
			}
		}
		wg.Wait()
	})
	for key, d := range out {
		slices.SortFunc(d.runs, func(a, b p5Run) int { return a.index - b.index })
		out[key] = d
	}
	return out
}

// p5Run is what one P5 run measured, in seconds: its index among its kind's runs, when users saw
// A take over (the first denial's answer) and when A logged it did, the longest stretches
// validated by neither and by both operators, the invalid probes admitted in between and the
// probes validated by both.
type p5Run struct {
	index                                   int
	answered, takeover, neitherMax, bothMax float64
	admitted, bothProbes                    int
}

// distribution is what P5 measured for one kind, run by run.
type distribution struct {
	timings chart.LeaseTimings
	runs    []p5Run
}

// takeovers are the runs' takeover times, in seconds.
func (d distribution) takeovers() []float64 {
	out := make([]float64, 0, len(d.runs))
	for _, r := range d.runs {
		out = append(out, r.takeover)
	}
	return out
}

// note puts the distribution into summary.json under keys prefixed with key.
func (d distribution) note(ctx context.Context, t *testing.T, key string) {
	t.Helper()
	var answered, neitherMax, bothMax []float64
	var admitted, bothProbes []int
	for _, r := range d.runs {
		answered = append(answered, r.answered)
		neitherMax = append(neitherMax, r.neitherMax)
		bothMax = append(bothMax, r.bothMax)
		admitted = append(admitted, r.admitted)
		bothProbes = append(bothProbes, r.bothProbes)
	}
	noteFailovers(ctx, t, key, d.timings, d.takeovers())
	suite.Note(ctx, t, key+"AnsweredSeconds", answered)
	suite.Note(ctx, t, key+"NeitherWindowMaxSeconds", neitherMax)
	suite.Note(ctx, t, key+"BothWindowMaxSeconds", bothMax)
	suite.Note(ctx, t, key+"ValidatedByBothProbes", bothProbes)
	suite.Note(ctx, t, key+"AdmittedUnvalidated", admitted)
}

// measureDistribution runs kind k's share of the plan's P5 runs — every len(k.namespaces)-th
// from share on — on restricted operator b, and checks each.
func (s *scenarios) measureDistribution(ctx context.Context, t *testing.T, b restricted, k distributionKind, share int) distribution {
	t.Helper()
	c := suite.ClusterFrom(ctx, t)
	t.Cleanup(func() { b.restore(ctx, t) })
	ns := b.rel.RestrictedNamespace()
	timings, err := chart.LeaseTimingsOf(b.rel)
	expect.NoError(t, err, "reading the lease timings of %s", b)
	// A frozen B holds each webhook call until the API server gives up on it: the mutating and
	// then the validating call, timeoutSeconds each.
	hang := 2 * webhookTimeout(ctx, t, c, b)
	bound := timings.FailoverWindow() + failoverSlack
	runs := s.plan.DistributionRuns

	d := distribution{timings: timings}
	for i := share; i < runs; i += len(k.namespaces) {
		f := b.measureFailover(ctx, t, c, k.how, fmt.Sprintf("p5-%s-%d", k.key, i))
		for late := 1; killedTooLate(f); late++ {
			if late > maxLateKills {
				expect.Errorf(t, "expected to kill %s's pod with kill -9 while it ran untouched in its preStop delay; %d times in a row the pod had handled its SIGTERM and released its Lease first (last: pod %s at %s, %.2fs before the kill): the machine is too busy to time the kill",
					b, maxLateKills+1, f.pod, f.released.Format(time.RFC3339Nano), f.stoppedAt.Sub(f.released).Seconds())
				return d
			}
			t.Logf("P5 %s run %d/%d void: %s's pod %s handled its SIGTERM and released its Lease at %s, %.2fs before the kill -9 was asked (the test saw the pod's deletion too late on a busy machine); running it again (%d of %d)",
				k.key, i+1, runs, b, f.pod, f.released.Format(time.RFC3339Nano), f.stoppedAt.Sub(f.released).Seconds(), late, maxLateKills)
			f = b.measureFailover(ctx, t, c, k.how, fmt.Sprintf("p5-%s-%d-again%d", k.key, i, late))
		}
		checkCommon(t, f, ns)
		k.check(t, f, ns)
		neither, both := validatorRuns(f.probes, f.aVerdicts, f.bVerdicts)
		n, bo := maxSpan(neither), maxSpan(both)
		r := p5Run{index: i, answered: round3(f.elapsed.Seconds()), takeover: round3(f.takeover.Seconds()),
			neitherMax: round3(n.Seconds()), bothMax: round3(bo.Seconds()), admitted: f.admitted}
		for _, run := range both {
			r.bothProbes += run.count
		}
		d.runs = append(d.runs, r)
		t.Logf("P5 %s run %d/%d: A took %s over %.2fs after %s was %s (answered after %.2fs); longest stretch validated by neither %.2fs, by both %.2fs (%d probes)",
			k.key, i+1, runs, ns, f.takeover.Seconds(), b, k.how, f.elapsed.Seconds(), n.Seconds(), bo.Seconds(), r.bothProbes)

		// M6's rule, per run: no stretch validated by neither or by both lasts longer than
		// leaseDuration + gracePeriod (+ the measurement slack); a frozen B's stretch of
		// neither also holds each probe for its webhook calls' timeouts.
		nBound := bound
		if k.how == frozen {
			nBound += hang
		}
		for _, r := range neither {
			if r.span() > nBound {
				expect.Errorf(t, "run %d after %s was %s: expected %s to be validated by neither operator for at most %s; %d probes from %s (sent %+.2fs after the stop) to %s went unvalidated for %.2fs",
					i+1, b, k.how, ns, nBound, r.count, r.first.name, r.first.sent.Sub(f.stoppedAt).Seconds(), r.last.name, r.span().Seconds())
			}
		}
		for _, r := range both {
			if r.span() > bound {
				expect.Errorf(t, "run %d after %s was %s: expected %s to be validated by both operators for at most %s; %d probes from %s (sent %+.2fs after the stop) to %s were validated by both for %.2fs",
					i+1, b, k.how, ns, bound, r.count, r.first.name, r.first.sent.Sub(f.stoppedAt).Seconds(), r.last.name, r.span().Seconds())
			}
		}
	}
	return d
}

// killedTooLate tells a kill -9 run that did not happen as meant: the pod logged the release
// of its Lease before the kill was asked, so it had handled its SIGTERM (after the preStop
// delay) before the test's kill — the measurement is of a graceful stop, not of a kill. A
// release logged after the kill was asked is no such excuse: checkKilled fails it.
func killedTooLate(f failover) bool {
	return f.how == sigkilled && !f.released.IsZero() && f.released.Before(f.stoppedAt)
}

// compareLayouts checks that measuring the kinds at once did not shift kind k's takeover.
func compareLayouts(t *testing.T, k distributionKind, sequential, overlapped distribution) {
	t.Helper()
	if len(sequential.runs) == 0 || len(overlapped.runs) == 0 {
		return // a layout without runs has failed already
	}
	seq, ovl := slices.Sorted(slices.Values(sequential.takeovers())), slices.Sorted(slices.Values(overlapped.takeovers()))
	diff, spread, ok := sameMedians(seq, ovl)
	t.Logf("P5 %s takeover: one after another median %.3fs (IQR %.3fs, %d runs), at once median %.3fs (IQR %.3fs, %d runs): %+.3fs",
		k.key, median(seq), iqr(seq), len(seq), median(ovl), iqr(ovl), len(ovl), diff)
	if !ok {
		expect.Errorf(t, "expected P5's %s takeover not to shift when the three kinds run at once: the medians may differ by at most the larger interquartile range, %.3fs; one after another %.3fs (%v), at once %.3fs (%v), %+.3fs",
			k.key, spread, median(seq), seq, median(ovl), ovl, diff)
	}
}

// sameMedians compares two sorted samples: ok when their medians differ (diff, b's less a's) by
// no more than the larger of their interquartile ranges (spread), the run-to-run spread.
func sameMedians(a, b []float64) (diff, spread float64, ok bool) {
	diff = median(b) - median(a)
	spread = math.Max(iqr(a), iqr(b))
	return diff, spread, math.Abs(diff) <= spread
}

// iqr is the interquartile range of sorted values: the median of the upper half less that of
// the lower half (0 for fewer than two values).
func iqr(sorted []float64) float64 {
	n := len(sorted)
	if n < 2 {
		return 0
	}
	return median(sorted[(n+1)/2:]) - median(sorted[:n/2])
}

// maxSpan is the longest span of runs, 0 without runs.
func maxSpan(runs []probeRun) time.Duration {
	var longest time.Duration
	for _, r := range runs {
		longest = max(longest, r.span())
	}
	return longest
}

// webhookTimeout is the timeoutSeconds of b's validating webhooks (the API server's limit on
// one call), from its configuration.
func webhookTimeout(ctx context.Context, t *testing.T, c *suite.Cluster, b restricted) time.Duration {
	t.Helper()
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
