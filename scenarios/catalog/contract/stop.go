package contract

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// W13 keeps at least stopStreams connections to the stopping pod (one per judged webhook when
// there are more), each sending reviews back to back, every body paused stopPause halfway: at
// any instant most are mid-request, and the others about to send on a kept-alive connection.
const (
	stopStreams = 6
	stopPause   = 100 * time.Millisecond
)

// stopWarm bounds the wait, before the deletion, until every stream has had a review answered:
// each connection is made and serving, so a failure after the deletion is the stop's.
const stopWarm = 2 * reviewTimeout

// stopSlack is how long past the pod's termination grace period W13 waits for the pod to end
// its connections.
const stopSlack = time.Minute

// errEndpointGone is what a stream's dialer answers once the pod is deleted: the API server
// no longer picks a terminating pod for a new connection, it only goes on with those it keeps.
var errEndpointGone = errors.New("no new connection to a deleted pod")

// gracefulStop is W13: a pod that stops answers every review sent on the connections it has
// kept alive, until it closes them. Connections made before the pod is deleted carry reviews
// back to back, as the API server's do under load, each body paused halfway; after the
// deletion no new connection is made, as the API server picks only endpoints that are not
// terminating. Every review sent must be answered and judged: a review the pod was reading when
// it stopped, or one sent on a kept-alive connection it closed without `Connection: close`, is
// a failed call for the API server (it does not resend a POST it has written), so a failed
// admission under failurePolicy Fail and an unjudged one under Ignore.
func gracefulStop() e2etypes.Feature {
	var ns string
	var stopped types.UID
	return features.New("a stopping pod answers every review sent on the connections it keeps alive, until it closes them").
		WithLabel(suite.LabelScenario, "W13").
		Setup(suite.NamespaceSetup(&ns, "w13")).
		Assess("reviews sent back to back to a pod as it is deleted and stops are each answered and judged", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			judged, _ := probedWebhooks(it)
			if len(judged) == 0 {
				expect.Skipf(t, "no webhook has a probe that shows it judges (W1 names them)")
			}
			pod := readyPods(ctx, t, c, it, 1)[0]
			grace := time.Duration(corev1.DefaultTerminationGracePeriodSeconds) * time.Second
			if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
				grace = time.Duration(*g) * time.Second
			}
			roots := map[string]*x509.CertPool{}
			for _, w := range judged {
				roots[w.Name] = webhookRoots(ctx, t, c, w.Webhook)
			}
			streams := make([]stream, max(stopStreams, len(judged)))
			s := &stopping{c: c, it: it, pod: &pod, ns: ns, answered: make([]atomic.Int64, len(streams))}
			streamCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			var wg sync.WaitGroup
			for i := range streams {
				w := judged[i%len(judged)]
				wg.Go(func() { streams[i] = s.stream(streamCtx, i, w, roots[w.Name]) })
			}
			if i, ok := s.warm(ctx); !ok {
				cancel()
				wg.Wait()
				expect.Fatalf(t, "before the deletion, expected each of %d connections to pod %s to have had a review answered within %s; connection %d had none: %s", len(streams), pod.Name, stopWarm, i, s.summary(i, streams[i]))
			}
			s.markDeleted()
			stopped = pod.UID
			expect.NoError(t, c.Kube().CoreV1().Pods(it.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &stopped}}),
				"deleting pod %s/%s", it.Namespace, pod.Name)
			deadline := time.AfterFunc(grace+stopSlack, cancel)
			defer deadline.Stop()
			wg.Wait()

			var wrong, open, ends []string
			for i, st := range streams {
				ends = append(ends, fmt.Sprintf("%d: %s", i, s.summary(i, st)))
				if st.ended == "" {
					open = append(open, fmt.Sprintf("connection %d (webhook %s)", i, st.webhook))
				}
				for _, f := range st.failures {
					wrong = append(wrong, fmt.Sprintf("connection %d (webhook %s), %s", i, st.webhook, f))
				}
			}
			suite.Note(ctx, t, "stopped pod", fmt.Sprintf("%s (termination grace period %s)", pod.Name, grace))
			suite.Note(ctx, t, "connections", ends)
			if len(wrong) > 0 {
				expect.Errorf(t, "expected every review sent to pod %s on a connection it kept alive to be answered and judged, before and after its deletion; saw %d not:\n  %s",
					pod.Name, len(wrong), strings.Join(firstOf(wrong, 20), "\n  "))
			}
			if len(open) > 0 {
				expect.Errorf(t, "expected pod %s to end every connection within its termination grace period %s and %s after its deletion; still open: %s", pod.Name, grace, stopSlack, strings.Join(open, ", "))
			}
			return ctx
		}).
		Assess("the Deployment replaces the pod and every webhook answers through the API server", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			if stopped == "" {
				t.Skip("no pod was deleted")
			}
			expect.NoError(t, release.WaitDeploymentAvailable(ctx, c.Kube(), it.Namespace, it.Served.Deployment, restartTimeout),
				"waiting for Deployment %s/%s to replace the stopped pod", it.Namespace, it.Served.Deployment)
			restartSettled(ctx, t, c, it, map[types.UID]bool{stopped: true}, "after W13's stop")
			expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
			return ctx
		}).Feature()
}

// stopping is W13's run against one pod.
type stopping struct {
	c   *suite.Cluster
	it  *target.Installed
	pod *corev1.Pod
	ns  string

	deleted  atomic.Pointer[time.Time]
	answered []atomic.Int64 // reviews answered and judged, by stream
}

// warm waits until every stream has had a review answered, at most stopWarm; or says which
// has not.
func (s *stopping) warm(ctx context.Context) (int, bool) {
	deadline := time.Now().Add(stopWarm)
	for {
		waiting := -1
		for i := range s.answered {
			if s.answered[i].Load() == 0 {
				waiting = i
				break
			}
		}
		if waiting < 0 {
			return 0, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return waiting, false
		}
		_ = poll.Sleep(ctx, "a pause between checks that every stream has had a review answered", stopPause) // the loop ends on an ended ctx
	}
}

func (s *stopping) markDeleted() {
	now := time.Now()
	s.deleted.Store(&now)
}

// since says when at was relative to the deletion.
func (s *stopping) since(at time.Time) string {
	d := s.deleted.Load()
	if d == nil || at.Before(*d) {
		return "before the deletion"
	}
	return at.Sub(*d).Round(10*time.Millisecond).String() + " after the deletion"
}

// stream is what one connection's reviews came to.
type stream struct {
	webhook  string
	after    int      // reviews answered and judged after the deletion (all of them: stopping.answered)
	failures []string // each review not answered or not judged: when, and what came
	ended    string   // how the pod ended the connection; "" when it had not by the deadline
}

// summary says what stream i came to.
func (s *stopping) summary(i int, st stream) string {
	ended := st.ended
	if ended == "" {
		ended = "still open at the deadline"
	}
	return fmt.Sprintf("webhook %s, %d reviews answered (%d after the deletion), %d not; %s", st.webhook, s.answered[i].Load(), st.after, len(st.failures), ended)
}

// stream sends webhook w's judging probe to the pod back to back on one kept-alive connection
// (stream i, trusting roots) until the pod ends it after the deletion (or ctx ends), judging
// every answer.
func (s *stopping) stream(ctx context.Context, i int, w probed, roots *x509.CertPool) stream {
	st := stream{webhook: w.Name}
	obj, err := s.it.Target.Object(w.judging())
	if err != nil {
		st.failures = append(st.failures, err.Error())
		return st
	}
	closedAfterAnswer, lastFailed := false, false
	client := keptAlive(func(ctx context.Context) (net.Conn, error) {
		if s.deleted.Load() != nil {
			return nil, errEndpointGone
		}
		return s.c.DialPod(ctx, s.pod, s.it.Served.ContainerPort)
	}, &tls.Config{RootCAs: roots, ServerName: s.it.Served.ServiceHost(), MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	defer client.CloseIdleConnections()
	url := reviewURL(s.it.Served.ServiceHost(), s.it.Served.ContainerPort, w.Path)
	for ctx.Err() == nil {
		review, err := reviewOf(s.c, obj, s.ns)
		if err != nil {
			st.failures = append(st.failures, err.Error())
			return st
		}
		sent := time.Now()
		resp, closed, err := postPaused(ctx, client, url, review)
		switch {
		case errors.Is(err, errEndpointGone):
			switch {
			case lastFailed:
				st.ended = "ended by a failed review"
			case closedAfterAnswer:
				st.ended = "the pod closed it after an answer with `Connection: close`"
			default:
				st.ended = "the pod closed it while idle, noticed before the next review"
			}
			return st
		case err != nil && ctx.Err() != nil:
			return st
		case err != nil:
			st.failures, lastFailed = append(st.failures, fmt.Sprintf("review sent %s: %v", s.since(sent), err)), true
			continue
		}
		closedAfterAnswer = closed
		if seen := judgeAnswer(w, obj, review, resp); seen != "" {
			st.failures, lastFailed = append(st.failures, fmt.Sprintf("review sent %s: %s", s.since(sent), seen)), true
			continue
		}
		lastFailed = false
		s.answered[i].Add(1)
		if s.deleted.Load() != nil {
			st.after++
		}
	}
	return st
}

// postPaused posts review to url as the API server does, its body paused stopPause halfway,
// and returns the answer and whether it closed the connection (`Connection: close`).
func postPaused(ctx context.Context, client *http.Client, url string, review *admissionv1.AdmissionReview) (*admissionv1.AdmissionResponse, bool, error) {
	body, err := json.Marshal(review)
	if err != nil {
		return nil, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = int64(len(body))
	// As the API server's client: a body it can make again, so a request nothing of which was
	// written goes on another connection.
	req.GetBody = func() (io.ReadCloser, error) { return pausedBody(body), nil }
	req.Body, _ = req.GetBody()
	res, err := client.Do(req)
	if err != nil {
		return nil, false, err
	}
	resp, err := reviewAnswer(res)
	return resp, res.Close, err
}

// pausedBody reads body, pausing stopPause after its first half.
func pausedBody(body []byte) io.ReadCloser {
	half := len(body) / 2
	return io.NopCloser(io.MultiReader(bytes.NewReader(body[:half]), pause{}, bytes.NewReader(body[half:])))
}

// pause is an empty reader that first waits stopPause.
type pause struct{}

func (pause) Read([]byte) (int, error) {
	time.Sleep(stopPause)
	return 0, io.EOF
}

func firstOf(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return append(lines[:n:n], fmt.Sprintf("… and %d more", len(lines)-n))
}
