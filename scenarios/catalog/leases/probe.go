package leases

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// probeTimeout bounds one probe: longer than two webhook calls timing out (timeoutSeconds
// 10 s, once at the mutating and once at the validating stage), so a probe that reaches a
// frozen operator still comes back with the API server's answer and the other operator's log
// line.
const probeTimeout = 35 * time.Second

// probe is one server-side dry-run create of an invalid DynamoGraphDeployment (no services):
// every operator that validates it must deny it, so the operators' log lines for its unique
// name say who validated it.
type probe struct {
	name       string
	sent, done time.Time
	// err is the API server's answer; empty means the object was admitted.
	err string
}

// prober sends a probe every probeEvery without waiting for the previous one, so a webhook
// that hangs does not stop the clock.
type prober struct {
	ns     string
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	probes []*probe
}

// startProber probes namespace ns with names <prefix>-<random>-<n> until stop.
func startProber(ctx context.Context, c *suite.Cluster, ns, prefix string) *prober {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &prober{ns: ns, cancel: cancel}
	base := prefix + "-" + rand.String(4)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(probeEvery)
		defer tick.Stop()
		for n := 0; ; n++ {
			pr := &probe{name: fmt.Sprintf("%s-%d", base, n), sent: time.Now()}
			p.mu.Lock()
			p.probes = append(p.probes, pr)
			p.mu.Unlock()
			p.wg.Add(1)
			go p.send(ctx, c, pr)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

func (p *prober) send(ctx context.Context, c *suite.Cluster, pr *probe) {
	defer p.wg.Done()
	// A probe in flight when the prober stops still gets its answer.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	_, err := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(p.ns).Create(rctx, dynamo.InvalidGraphDeployment(p.ns, pr.name),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	p.mu.Lock()
	defer p.mu.Unlock()
	pr.done = time.Now()
	if err != nil {
		pr.err = err.Error()
	}
}

// answered are copies of the probes that have come back so far, in the order they were sent.
func (p *prober) answered() []probe {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []probe
	for _, pr := range p.probes {
		if !pr.done.IsZero() {
			out = append(out, *pr)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].sent.Before(out[j].sent) })
	return out
}

// stop stops sending, waits for the probes in flight and returns every probe.
func (p *prober) stop() []probe {
	p.cancel()
	p.wg.Wait()
	return p.answered()
}

// validated says whether a webhook log result means the operator ran its checks.
func validated(result string) bool { return result != "" && result != resultSkipped }

// verdicts maps probe name → results of the operator's `validate create` lines in ns.
func verdicts(entries []logEntry, ns string) map[string][]string {
	out := map[string][]string{}
	for _, e := range entries {
		if e.Msg == msgValidateCreate && e.Namespace == ns {
			out[e.Name] = append(out[e.Name], e.Result)
		}
	}
	return out
}

// logsCaughtUp returns follower's entries once they hold a verdict of ns for every probe (the
// operator logs after it answers, so the last lines may trail the answers), or after
// observeTimeout with what they hold then: the checks name any probe still missing.
func logsCaughtUp(ctx context.Context, follower *logFollower, ns string, probes []probe) []logEntry {
	var entries []logEntry
	_ = poll.Until(ctx, "the operator's log lines of every probe", observeTimeout, func(context.Context) (bool, string, error) {
		entries = follower.entries()
		v := verdicts(entries, ns)
		for _, p := range probes {
			if len(v[p.name]) == 0 {
				return false, p.name + " not logged yet", nil
			}
		}
		return true, "", nil
	})
	return entries
}

// validatedBy reports whether any of results is a validation (not a skip).
func validatedBy(results []string) bool {
	for _, r := range results {
		if validated(r) {
			return true
		}
	}
	return false
}

// firstDenied is the earliest answered of the probes sent at or after since whose results
// include a denial. Earliest answered, not earliest sent: a probe held up by a frozen
// webhook may be denied long after later ones.
func firstDenied(probes []probe, v map[string][]string, since time.Time) (probe, bool) {
	var first probe
	found := false
	for _, pr := range probes {
		if pr.sent.Before(since) || !slices.Contains(v[pr.name], resultDenied) {
			continue
		}
		if !found || pr.done.Before(first.done) {
			first, found = pr, true
		}
	}
	return first, found
}

// describeProbes summarises the operator's view of probes, for messages:
// "12 probes: 5 skipped, 7 denied".
func describeProbes(probes []probe, v map[string][]string) string {
	counts := map[string]int{}
	for _, pr := range probes {
		rs := v[pr.name]
		if len(rs) == 0 {
			counts["no log line"]++
			continue
		}
		counts[strings.Join(rs, "+")]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	return fmt.Sprintf("%d probes: %s", len(probes), strings.Join(parts, ", "))
}
