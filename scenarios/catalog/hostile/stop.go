package hostile

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/rawhttp"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// The operator's log lines that mark its webhook server's drain (webhook.Server.drain).
const (
	drainBegunLine    = "draining webhook connections"
	drainTimedOutLine = "drain timeout: idle connections reset"
)

// stopWait bounds each wait of H8 on the stopping pod: its preStop delay (the chart's
// shutdownDelaySeconds, 5 s) and its drain timeout (drainTimeoutSeconds, 2 s) with room for a
// busy machine.
const stopWait = time.Minute

// H8: a request in progress when the pod stops. The drain waits for the connections to close,
// then resets the idle ones; a connection whose request is still arriving is in use and must
// be served to its end.
func requestAcrossStop() types.Feature {
	var e *env
	return features.New("H8 a request still arriving when the operator's pod stops — its body half sent until the drain has timed out — is answered with `Connection: close`, not reset with the idle connections (directly to the pod)").
		WithLabel(suite.LabelScenario, "H8").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			e = discover(ctx, t)
			return ctx
		}).
		Assess("the request in progress across the drain timeout is answered", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			answeredAcrossDrain(ctx, t, e)
			return ctx
		}).
		Assess("a new pod took over: admission and conversion work afterwards", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			err := release.WaitDeploymentAvailable(ctx, e.c.Kube(), e.r.WebhookNamespace(), e.r.DeploymentName(), 3*time.Minute)
			expect.NoError(t, err, "waiting for Deployment %s/%s to replace the stopped pod", e.r.WebhookNamespace(), e.r.DeploymentName())
			admissionWorks(ctx, t, &watch{env: e, id: "H8"})
			return ctx
		}).
		Feature()
}

// answeredAcrossDrain opens a connection to the pod and uses it once, so that it is open when
// the pod stops; deletes the pod; once the drain has begun, sends a request's head and half its
// body on that connection; once the drain has timed out, sends the rest; and expects the
// answer a stopping server gives: the review answered, and `Connection: close`.
func answeredAcrossDrain(ctx context.Context, t *testing.T, e *env) {
	t.Helper()
	p := e.webhookPaths[0]
	direct := e.routes[0]
	pod := e.pod
	body := p.validBody()
	whole := rawhttp.Send(http.MethodPost, p.path, "application/json", body, "a "+p.path+" review")

	conn, err := e.dialTLS(ctx, direct)
	expect.NoError(t, err, "connecting %s", direct.name)
	defer func() { _ = conn.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	br := bufio.NewReader(conn)
	_ = conn.SetDeadline(time.Now().Add(answerBound))
	first := roundTrip(conn, br, whole)
	if first.Err != nil || first.Status != http.StatusOK || first.Closed {
		expect.Fatalf(t, "expected %s %s to be answered with HTTP 200 on a connection kept open, before the pod stops; saw %s", whole.What, direct.name, first)
	}

	logs := followDrain(ctx, e.c, pod)
	err = e.c.Kube().CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	expect.NoError(t, err, "deleting operator pod %s/%s", pod.Namespace, pod.Name)
	deleted := time.Now()
	begun := logs.await(t, drainBegunLine, "after the pod's deletion")

	_ = conn.SetDeadline(time.Time{})
	half := len(body) / 2
	arriving := rawhttp.Request{Method: http.MethodPost, Path: p.path, ContentType: "application/json", Length: int64(len(body)),
		Body: rawhttp.Bytes(body[:half]), What: fmt.Sprintf("%s whose body stopped after %d of %d bytes", whole.What, half, len(body))}
	if err := rawhttp.WriteRequest(conn, arriving); err != nil {
		expect.Fatalf(t, "expected the connection %s to stay open while the pod drains; writing %s: %v (the pod logged %s)", direct.name, arriving.What, err, begun)
	}
	if line, ok := logs.seen(drainTimedOutLine); ok {
		expect.Fatalf(t, "could not arrange H8: the drain had already timed out when %s was sent (%s after the pod's deletion; the pod logged %s); the log reached this machine too late", arriving.What, time.Since(deleted).Round(time.Millisecond), line)
	}
	timedOut := logs.await(t, drainTimedOutLine, "while "+arriving.What+" was in progress")
	suite.Note(ctx, t, "secondsFromDeletionToDrainTimeout", time.Since(deleted).Round(100*time.Millisecond).Seconds())

	_ = conn.SetDeadline(time.Now().Add(bodyTimeout))
	start := time.Now()
	var a rawhttp.Answer
	if _, err := conn.Write(body[half:]); err != nil {
		a = rawhttp.Answer{Took: time.Since(start), Err: fmt.Errorf("writing the rest of the body: %w", err)}
	} else {
		a = rawhttp.ReadAnswer(conn, br, start, bodyTimeout)
	}
	want := "HTTP 200 with the AdmissionReview's answer (its uid) and `Connection: close`"
	if got := judgeReviewAnswer(a, body); got != "" {
		expect.Errorf(t, "expected %s, still arriving when the drain timed out, to be answered %s with %s: a connection in use is served to its end; saw %s (%s). The pod logged %s",
			arriving.What, direct.name, want, a, got, timedOut)
	}
}

// roundTrip writes req on conn and reads its answer from br, conn's reader.
func roundTrip(conn net.Conn, br *bufio.Reader, req rawhttp.Request) rawhttp.Answer {
	start := time.Now()
	if err := rawhttp.WriteRequest(conn, req); err != nil {
		return rawhttp.Answer{Took: time.Since(start), Err: err}
	}
	return rawhttp.ReadAnswer(conn, br, start, answerBound)
}

// judgeReviewAnswer says what is wrong with a, the answer to the admission review body ("" if
// nothing): HTTP 200, an AdmissionReview answering the request's uid, and the connection
// closed after it (`Connection: close`).
func judgeReviewAnswer(a rawhttp.Answer, body []byte) string {
	var req struct {
		Request struct {
			UID string `json:"uid"`
		} `json:"request"`
	}
	_ = json.Unmarshal(body, &req) // the scenario's own review
	var got struct {
		Kind     string `json:"kind"`
		Response *struct {
			UID string `json:"uid"`
		} `json:"response"`
	}
	switch {
	case a.Err != nil:
		return "the connection ended under the request"
	case a.Status != http.StatusOK:
		return fmt.Sprintf("HTTP %d", a.Status)
	case json.Unmarshal([]byte(a.Body), &got) != nil || got.Kind != "AdmissionReview" || got.Response == nil:
		return "not an AdmissionReview with a response"
	case got.Response.UID != req.Request.UID:
		return fmt.Sprintf("the answer is for uid %q, the request's is %q", got.Response.UID, req.Request.UID)
	case !a.Closed:
		return fmt.Sprintf("the connection left open (Connection: %q)", a.Header.Get("Connection"))
	}
	return ""
}

// drainLog follows a pod's operator log and keeps the lines that mark its drain.
type drainLog struct {
	pod   string
	lines chan string
	found map[string]string
	err   chan error
	ended error // what err said, once it did
}

// followDrain follows pod's operator log until ctx ends or the log does.
func followDrain(ctx context.Context, c *suite.Cluster, pod corev1.Pod) *drainLog {
	l := &drainLog{pod: pod.Namespace + "/" + pod.Name, lines: make(chan string, 64), found: map[string]string{}, err: make(chan error, 1)}
	go func() {
		rc, err := c.Kube().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "operator", Follow: true}).Stream(ctx)
		if err != nil {
			l.err <- err
			return
		}
		defer func() { _ = rc.Close() }()
		sc := bufio.NewScanner(rc)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if line := sc.Text(); strings.Contains(line, drainBegunLine) || strings.Contains(line, drainTimedOutLine) {
				l.lines <- line
			}
		}
		l.err <- fmt.Errorf("the log ended: %v", sc.Err())
	}()
	return l
}

// seen says whether the log has shown a line containing what, without waiting.
func (l *drainLog) seen(what string) (string, bool) {
	for {
		select {
		case line := <-l.lines:
			l.record(line)
		default:
			line, ok := l.found[what]
			return line, ok
		}
	}
}

func (l *drainLog) record(line string) {
	for _, what := range []string{drainBegunLine, drainTimedOutLine} {
		if strings.Contains(line, what) {
			l.found[what] = line
		}
	}
}

// await waits for a line containing what, and fails the scenario when it does not come.
func (l *drainLog) await(t *testing.T, what, when string) string {
	t.Helper()
	deadline := time.After(stopWait)
	for {
		if line, ok := l.seen(what); ok {
			return line
		}
		if l.ended != nil {
			expect.Fatalf(t, "expected operator pod %s to log %q %s; following its log: %v", l.pod, what, when, l.ended)
		}
		select {
		case line := <-l.lines:
			l.record(line)
		case l.ended = <-l.err: // seen reads the lines sent before it, next time round
		case <-deadline:
			expect.Fatalf(t, "expected operator pod %s to log %q %s; not within %s", l.pod, what, when, stopWait)
		}
	}
}
