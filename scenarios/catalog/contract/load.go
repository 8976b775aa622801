package contract

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/load"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// The admission load W8 and W9 run under, and how much of it runs before the first change and
// after the last one: a second's worth of answers.
const (
	loadRate    = 50
	loadMargin  = loadRate
	loadStartup = 30 * time.Second // bounds the wait for the first loadMargin answers
)

// judged is a probe object whose answer shows that its webhook judged it, and how that answer is
// judged ("" when the webhook judged it as declared): a validating webhook's denied probe must
// come back denied by that webhook with the declared message, a mutating webhook's admitted
// probe must carry the declared patch. Under failurePolicy Ignore an unreachable webhook admits
// silently, so only a judged answer shows the webhook was reached.
type judged struct {
	webhook string
	obj     *unstructured.Unstructured
	judge   func(sent) string
}

// judgedProbes are the judged probes of every webhook the target serves; it stops the test when
// there is none.
func judgedProbes(t *testing.T, it *target.Installed) []judged {
	t.Helper()
	var out []judged
	for _, w := range it.Served.Webhooks {
		p := probeOf(it, w.Name)
		switch {
		case p == nil:
		case !w.Mutating && p.Denied != nil:
			out = append(out, judged{webhook: w.Name, obj: object(t, it, p.Denied.Object), judge: func(s sent) string { return judgeDenial(*p, s) }})
		case w.Mutating && p.Patch != "":
			out = append(out, judged{webhook: w.Name, obj: object(t, it, p.Admitted), judge: func(s sent) string { return judgePatch(*p, s) }})
		}
	}
	if len(out) == 0 {
		expect.Fatalf(t, "target %s has no probe whose answer shows a webhook judged it (a validating webhook's denied object, a mutating one's patch): W1 says which are missing", it.Target.Name)
	}
	return out
}

// startProbeLoad starts loadRate server-side dry-run creates per second (load.Start, open loop)
// of the judged probes, one after another: a request fails unless its webhook judged it as
// declared. It first waits until each webhook judges its probe (W1's wait: a policy engine
// compiles its setup before it denies), and returns once the load has answered for a second.
func startProbeLoad(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed, ns string) *load.Load {
	t.Helper()
	requests := judgedProbes(t, it)
	expectJudged(ctx, t, c, requests, ns, answerTimeout, "before the load")
	l := load.Start(ctx, loadRate, func(ctx context.Context, n int) error {
		r := requests[n%len(requests)]
		if seen := r.judge(dryRun(ctx, c, r.obj, ns)); seen != "" {
			return errors.New(seen)
		}
		return nil
	})
	if err := l.WaitAnswered(ctx, loadMargin, loadStartup); err != nil {
		l.Stop()
		expect.Fatalf(t, "the probe load of %d webhooks at %d/s did not start: %v", len(requests), loadRate, err)
	}
	t.Logf("probe load started: %d/s, cycling %d judged probes; %s", loadRate, len(requests), l)
	return l
}

// finishLoad lets the load run for another second after the last change, then stops it and
// expects no failed admission (load.ExpectNoFailures); through names what it ran through.
func finishLoad(ctx context.Context, t *testing.T, l *load.Load, through string) {
	t.Helper()
	if err := l.WaitAnswered(ctx, loadMargin, loadStartup); err != nil {
		expect.Errorf(t, "after %s: %v", through, err)
	}
	l.ExpectNoFailures(ctx, t, through)
}

// expectJudged waits until every one of requests is judged by its webhook as declared (a policy
// engine compiles its setup first; a restored target settles), within timeout; when says when
// ("before the load").
func expectJudged(ctx context.Context, t *testing.T, c *suite.Cluster, requests []judged, ns string, timeout time.Duration, when string) {
	t.Helper()
	for _, r := range requests {
		expect.Eventually(ctx, t, fmt.Sprintf("webhook %s to judge its probe %s", r.webhook, when), timeout, func(ctx context.Context) (bool, string, error) {
			seen := r.judge(dryRun(ctx, c, r.obj, ns))
			return seen == "", seen, nil
		})
	}
}
