package certmodes

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// Startup log lines C11 puts in order: the operator waits for its certificate, loads it, and
// only then does controller-runtime start the webhook server.
const (
	msgWaitingForCertificate = "waiting for the webhook serving certificate"
	msgCertificateLoaded     = "webhook serving certificate loaded"
	msgWebhookServerStarting = "Starting webhook server"
)

// observeEvery is how often C11 probes the new pod; observeAfterReady how long it keeps
// probing once the pod reports ready.
const (
	observeEvery      = 50 * time.Millisecond
	observeAfterReady = 2 * time.Second
)

// servingOrder is C11: from the moment a new operator pod has an address, probed directly
// (its IP, not the Service, which routes only to Ready pods): readiness is never reported
// before the webhook port serves a certificate the API server trusts, no handshake ever
// presents a certificate the caBundle does not verify, and the operator's log says it loaded
// the certificate before the webhook server started.
func servingOrder() types.Feature {
	return features.New("from its first moment, an operator pod reports ready only once it serves a trusted certificate").
		WithLabel(suite.LabelScenario, "C11").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		Assess("a rollout's new pod, probed directly from its first address until after it is ready", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			trust := trustedByAPIServer(ctx, t, c, r)
			before, err := release.OperatorPods(ctx, c.Kube(), r)
			expect.NoError(t, err, "listing the operator's pods")
			expect.NoError(t, release.RolloutRestart(ctx, c.Kube(), r.Namespace, r.DeploymentName()), "rollout restart")
			pod := newPodWithAddress(ctx, t, c, r, before)

			obs := observeStartup(ctx, t, c, r, pod, trust)
			suite.Note(ctx, t, "probes", obs.probes)
			suite.Note(ctx, t, "firstServedAfterSeconds", round3(obs.firstServed.Sub(obs.start).Seconds()))
			suite.Note(ctx, t, "firstReadyAfterSeconds", round3(obs.firstReady.Sub(obs.start).Seconds()))
			for _, v := range obs.violations {
				expect.Errorf(t, "pod %s/%s: %s", pod.Namespace, pod.Name, v)
			}
			switch {
			case obs.firstServed.IsZero():
				expect.Errorf(t, "expected pod %s/%s to serve a trusted certificate on its webhook port within %s; it never did in %d probes", pod.Namespace, pod.Name, rolloutTimeout, obs.probes)
			case obs.firstReady.IsZero():
				expect.Errorf(t, "expected pod %s/%s to report ready (GET /readyz 200) within %s; it never did in %d probes", pod.Namespace, pod.Name, rolloutTimeout, obs.probes)
			}
			expectLogOrder(ctx, t, c, pod, msgWaitingForCertificate, msgCertificateLoaded, msgWebhookServerStarting)
			expect.NoError(t, release.WaitDeploymentAvailable(ctx, c.Kube(), r.Namespace, r.DeploymentName(), rolloutTimeout), "waiting for the rollout")
			expect.NoError(t, release.WaitOldPodsGone(ctx, c.Kube(), r, rolloutTimeout), "waiting for the replaced pods to be gone")
			return ctx
		})).
		Feature()
}

// trustedByAPIServer is the caBundle of the release's validating webhook: what the API server
// verifies the webhook's certificate against.
func trustedByAPIServer(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) *x509.CertPool {
	t.Helper()
	vwc, err := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, r.ValidatingName(), metav1.GetOptions{})
	expect.NoError(t, err, "reading ValidatingWebhookConfiguration %s", r.ValidatingName())
	pool := x509.NewCertPool()
	if len(vwc.Webhooks) == 0 || !pool.AppendCertsFromPEM(vwc.Webhooks[0].ClientConfig.CABundle) {
		expect.Fatalf(t, "expected a caBundle in ValidatingWebhookConfiguration %s", r.ValidatingName())
	}
	return pool
}

// newPodWithAddress waits, polling fast, for a pod of r that is not one of before and has an IP.
func newPodWithAddress(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, before []corev1.Pod) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	err := poll.UntilEvery(ctx, "a new operator pod with an address after the rollout restart", observeEvery, rolloutTimeout,
		func(ctx context.Context) (bool, string, error) {
			pods, err := release.OperatorPods(ctx, c.Kube(), r)
			if err != nil {
				return false, err.Error(), nil
			}
			var seen []string
			for _, p := range pods {
				if !slices.ContainsFunc(before, func(b corev1.Pod) bool { return b.UID == p.UID }) && p.Status.PodIP != "" {
					pod = p
					return true, "", nil
				}
				seen = append(seen, release.PodState(&p))
			}
			return false, strings.Join(seen, "; "), nil
		})
	expect.NoError(t, err, "waiting for the rollout's new pod")
	return pod
}

// startup is what C11 saw of a starting pod.
type startup struct {
	start, firstServed, firstReady time.Time
	probes                         int
	violations                     []string
}

// observeStartup probes pod until observeAfterReady past its first ready answer: each round
// asks /readyz first, then completes a TLS handshake on the webhook port as the API server
// would. A ready answer followed by a port that does not serve a trusted certificate is a
// violation (serving, once started, never stops during a startup).
func observeStartup(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, pod corev1.Pod, trust *x509.CertPool) startup {
	t.Helper()
	webhookPort, ok := release.ContainerPort(&pod, "webhook-server")
	healthPort, ok2 := release.ContainerPort(&pod, "health")
	if !ok || !ok2 {
		expect.Fatalf(t, "expected pod %s/%s to have container ports webhook-server and health", pod.Namespace, pod.Name)
	}
	health := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return c.DialPod(ctx, &pod, healthPort) },
	}}
	tlsConfig := &tls.Config{RootCAs: trust, ServerName: r.ServiceHost(), MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	obs := startup{start: time.Now()}
	deadline := obs.start.Add(rolloutTimeout)
	for time.Now().Before(deadline) && (obs.firstReady.IsZero() || time.Since(obs.firstReady) < observeAfterReady) {
		obs.probes++
		ready := readyz(ctx, health)
		if ready && obs.firstReady.IsZero() {
			obs.firstReady = time.Now()
		}
		err := handshake(ctx, c, &pod, webhookPort, tlsConfig)
		var verr *tls.CertificateVerificationError
		switch {
		case err == nil:
			if obs.firstServed.IsZero() {
				obs.firstServed = time.Now()
			}
		case errors.As(err, &verr):
			obs.violations = append(obs.violations, fmt.Sprintf("the webhook port presented a certificate the API server's caBundle does not verify, %.2fs after the pod had an address: %v",
				time.Since(obs.start).Seconds(), err))
		}
		if ready && err != nil {
			obs.violations = append(obs.violations, fmt.Sprintf("expected readiness only once the webhook port serves a trusted certificate; /readyz answered 200 %.2fs after the pod had an address, and the handshake right after it failed: %v",
				time.Since(obs.start).Seconds(), err))
		}
		if len(obs.violations) > 3 {
			break
		}
		if poll.Sleep(ctx, "a pause between probes of the new pod's readiness and served certificate", observeEvery) != nil {
			break // probes with an ended ctx would only fail until the deadline
		}
	}
	return obs
}

func readyz(ctx context.Context, client *http.Client) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://pod/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close() // only the status matters
	return resp.StatusCode == http.StatusOK
}

func handshake(ctx context.Context, c *suite.Cluster, pod *corev1.Pod, port int32, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	raw, err := c.DialPod(ctx, pod, port)
	if err != nil {
		return err
	}
	conn := tls.Client(raw, cfg.Clone())
	defer func() { _ = conn.Close() }() // only the handshake matters
	return conn.HandshakeContext(ctx)
}

// expectLogOrder checks the operator container's log of pod: the entries whose message is one
// of want appear each exactly once, in want's order.
func expectLogOrder(ctx context.Context, t *testing.T, c *suite.Cluster, pod corev1.Pod, want ...string) {
	t.Helper()
	steps := make([]logStep, len(want))
	for i, m := range want {
		steps[i] = logStep{always: []string{m}}
	}
	expectLogSequence(ctx, t, c, pod, steps...)
}

// logStep is one step of a log sequence the operator promises. always are logged exactly once
// at this step, by goroutines that race, so their order among themselves is not checked. maybe
// are logged at most once, and only at this step: whether they are logged at all is decided by
// a race (a read before or after another replica's write, an API request that failed once), so
// asserting them would assert the race, not the promise.
type logStep struct {
	always, maybe []string
}

// expectLogSequence checks the operator container's log of pod against steps: every message of
// a step after every message of the steps before it, each always message exactly once, each
// maybe message at most once.
func expectLogSequence(ctx context.Context, t *testing.T, c *suite.Cluster, pod corev1.Pod, steps ...logStep) {
	t.Helper()
	stream, err := c.Kube().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "operator"}).Stream(ctx)
	expect.NoError(t, err, "reading the log of pod %s/%s", pod.Namespace, pod.Name)
	defer func() { _ = stream.Close() }() // read only
	var want []string
	for _, s := range steps {
		want = append(append(want, s.always...), s.maybe...)
	}
	var seen []string
	sc := bufio.NewScanner(stream)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		var line struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && slices.Contains(want, line.Msg) {
			seen = append(seen, line.Msg)
		}
	}
	if !inSequence(seen, steps) {
		expect.Errorf(t, "expected pod %s/%s to log %s; it logged %s", pod.Namespace, pod.Name, describeSequence(steps), quoted(seen))
	}
}

// inSequence reports whether seen follows steps: no message of a step after one of a later step,
// each always message exactly once and each maybe message at most once.
func inSequence(seen []string, steps []logStep) bool {
	stepOf := map[string]int{}
	for i, s := range steps {
		for _, m := range slices.Concat(s.always, s.maybe) {
			stepOf[m] = i
		}
	}
	count := map[string]int{}
	step := 0
	for _, m := range seen {
		i, ok := stepOf[m]
		if !ok || i < step {
			return false
		}
		step = i
		count[m]++
	}
	for _, s := range steps {
		for _, m := range s.always {
			if count[m] != 1 {
				return false
			}
		}
		for _, m := range s.maybe {
			if count[m] > 1 {
				return false
			}
		}
	}
	return true
}

// describeSequence is `"a" once, then "b" and "c" once each in either order (and "d" at most
// once), then "e" once`.
func describeSequence(steps []logStep) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		switch len(s.always) {
		case 1:
			parts[i] = quoted(s.always) + " once"
		default:
			parts[i] = quoted(s.always) + " once each in either order"
		}
		if len(s.maybe) > 0 {
			parts[i] += " (and " + quoted(s.maybe) + " at most once)"
		}
		if i > 0 {
			parts[i] = "then " + parts[i]
		}
	}
	return strings.Join(parts, ", ")
}

// quoted lists messages as "a", "b", "c" (or "nothing").
func quoted(msgs []string) string {
	if len(msgs) == 0 {
		return "nothing"
	}
	q := make([]string, len(msgs))
	for i, m := range msgs {
		q[i] = strconv.Quote(m)
	}
	return strings.Join(q, ", ")
}
