package certmodes

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// admissionLoad sends server-side dry-run creates of a valid DynamoGraphDeployment at a
// constant rate, each through both webhooks, and counts the ones that fail. It is open-loop:
// a slow request does not delay the next one, so a stall shows up as failures or latency
// instead of silently lowering the rate.
type admissionLoad struct {
	interval time.Duration // between two requests

	mu       sync.Mutex
	sent     int
	failed   int
	samples  []string // the first few failures, with their time
	slowest  time.Duration
	started  time.Time
	stopped  time.Time
	stop     context.CancelFunc
	inflight sync.WaitGroup
}

// maxFailureSamples bounds how many failure messages a report quotes.
const maxFailureSamples = 5

// startAdmissionLoad starts perSecond dry-run creates per second in namespace ns until Stop.
func startAdmissionLoad(ctx context.Context, c *suite.Cluster, ns string, perSecond int) *admissionLoad {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &admissionLoad{interval: time.Second / time.Duration(perSecond), stop: cancel, started: time.Now()}
	graphs := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	l.inflight.Go(func() {
		tick := time.NewTicker(l.interval)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			name := fmt.Sprintf("load-%d", n)
			l.inflight.Go(func() {
				// The webhooks' own timeout is at most 30 s; a request outliving that is stuck.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				start := time.Now()
				got, err := graphs.Create(rctx, dynamo.GraphDeployment(ns, name), dry)
				if err == nil {
					if _, ok := got.GetAnnotations()[dynamo.OriginVersionAnnotation]; !ok {
						err = fmt.Errorf("admitted without annotation %s (mutating webhook not called)", dynamo.OriginVersionAnnotation)
					}
				}
				l.record(start, time.Since(start), err)
			})
		}
	})
	return l
}

func (l *admissionLoad) record(at time.Time, took time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent++
	l.slowest = max(l.slowest, took)
	if err == nil {
		return
	}
	l.failed++
	if len(l.samples) < maxFailureSamples {
		l.samples = append(l.samples, fmt.Sprintf("at +%.1fs: %v", at.Sub(l.started).Seconds(), err))
	}
}

// Stop ends the load and waits for the requests in flight.
func (l *admissionLoad) Stop() {
	l.stop()
	l.inflight.Wait()
	l.mu.Lock()
	l.stopped = time.Now()
	l.mu.Unlock()
}

// counts are the requests answered so far and how many of them failed.
func (l *admissionLoad) counts() (sent, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent, l.failed
}

// String summarises the load: requests, failures, rate, slowest request and the first failures.
func (l *admissionLoad) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	end := l.stopped
	if end.IsZero() {
		end = time.Now()
	}
	secs := end.Sub(l.started).Seconds()
	s := fmt.Sprintf("%d requests in %.1fs (%.1f/s), %d failed, slowest %s", l.sent, secs, float64(l.sent)/secs, l.failed, l.slowest.Round(time.Millisecond))
	if len(l.samples) > 0 {
		s += "; first failures: " + strings.Join(l.samples, " | ")
	}
	return s
}

// expectNoFailures stops the load, puts its requests, failures and slowest request into the
// scenario's details, and fails the test when any request failed; through names what the load
// ran through ("through the renewal").
func (l *admissionLoad) expectNoFailures(ctx context.Context, t *testing.T, through string) {
	t.Helper()
	l.Stop()
	l.mu.Lock()
	sent, failed, slowest := l.sent, l.failed, l.slowest
	l.mu.Unlock()
	suite.Note(ctx, t, "requests", sent)
	suite.Note(ctx, t, "failures", failed)
	suite.Note(ctx, t, "slowestRequestSeconds", math.Round(slowest.Seconds()*1000)/1000)
	t.Logf("admission load %s: %s", through, l)
	if failed > 0 {
		expect.Errorf(t, "expected 0 failed admissions %s, saw %s", through, l)
	}
}
