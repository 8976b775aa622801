package leases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/jsonlog"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/metrics"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// operatorContainer is the chart's container name in the operator pod.
const operatorContainer = "operator"

// Log messages the scenarios read (operator/internal/webhook and namespacescope).
const (
	msgValidateCreate = "validate create"
	msgDefault        = "default"
	msgSkip           = "Skipping admission: a namespace-restricted operator's Lease is active in this namespace"
	msgExcluded       = "namespace excluded: active lock Lease held by "
	msgReincluded     = "namespace re-included: lock Lease "
	msgReleased       = "released the namespace lock Lease"
)

// Results of the webhook log lines and of the result label of dynamo_webhook_requests_total.
const (
	resultAllowed = "allowed"
	resultDenied  = "denied"
	resultSkipped = "skipped"
)

// Metric names and webhook labels of the operator (operator/internal/metrics, webhook.go).
const (
	metricRequests     = "dynamo_webhook_requests_total"
	metricLeaseHeld    = "dynamo_namespace_lease_held"
	metricExcluded     = "dynamo_namespace_excluded"
	webhookValidateDGD = "validate-dynamographdeployment"
	webhookMutateDGD   = "mutate-dynamographdeployment"
	webhookMutateDGDR  = "mutate-dynamographdeploymentrequest"
	operationCreate    = "CREATE"
	labelWebhook       = "webhook"
	labelOperation     = "operation"
	labelResult        = "result"
	labelNamespace     = "namespace"
)

// metricsReaders holds one metrics.Reader (and so one token) per cluster and release.
var metricsReaders sync.Map

func (o operator) metricsReader(c *suite.Cluster) *metrics.Reader {
	key := fmt.Sprintf("%p/%s", c, o.rel)
	r, _ := metricsReaders.LoadOrStore(key, metrics.NewReader(c.Kube(), o.rel))
	return r.(*metrics.Reader)
}

// operator is one of the topology's two operators, as the scenarios observe it.
type operator struct {
	// role names it in messages: "operator A (cluster-wide, platform-system/dynamo)".
	role string
	rel  *chart.Release
}

func (s *scenarios) opA() operator {
	r := s.topo.ClusterWide
	return operator{role: fmt.Sprintf("operator A (cluster-wide, release %s/%s)", r.Namespace, r.Name), rel: r}
}

func (s *scenarios) opB() restricted { return restrictedOperator("B", s.topo.Restricted, s.opA()) }

// restricted is a namespace-restricted operator together with the cluster-wide operator A that
// takes its namespace over when it goes away: what a failover stops, measures and brings back.
type restricted struct {
	operator
	a operator
}

// restrictedOperator is release r, restricted to its namespace, named name in messages
// ("operator B (restricted to team-a, release team-a/dynamo)"), with a the cluster-wide operator.
func restrictedOperator(name string, r *chart.Release, a operator) restricted {
	role := fmt.Sprintf("operator %s (restricted to %s, release %s/%s)", name, r.RestrictedNamespace(), r.Namespace, r.Name)
	return restricted{operator: operator{role: role, rel: r}, a: a}
}

func (o operator) String() string { return o.role }

// runningPods are the operator's pods that run and are not being deleted.
func (o operator) runningPods(ctx context.Context, c *suite.Cluster) ([]corev1.Pod, error) {
	pods, err := release.OperatorPods(ctx, c.Kube(), o.rel)
	if err != nil && !errors.Is(err, release.ErrNoPods) {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out, nil
}

// operatorMetrics are the samples scraped from every running pod of an operator.
type operatorMetrics struct{ metrics.Samples }

// scrape reads /metrics of every running pod as a user's Prometheus does: HTTPS with the bearer
// token of a ServiceAccount bound to the release's metrics-reader ClusterRole
// (metrics.Reader), on a connection the cluster provider opens to the pod. (The API
// server's pod proxy cannot carry it: the API server consumes the Authorization header.)
func (o operator) scrape(ctx context.Context, c *suite.Cluster) (operatorMetrics, error) {
	pods, err := o.runningPods(ctx, c)
	if err != nil {
		return operatorMetrics{}, err
	}
	if len(pods) == 0 {
		return operatorMetrics{}, fmt.Errorf("scraping the metrics of %s: no running pod", o)
	}
	var out operatorMetrics
	for _, p := range pods {
		port, err := metrics.Port(&p)
		if err != nil {
			return operatorMetrics{}, err
		}
		samples, err := o.scrapePod(ctx, c, &p, port)
		if err != nil {
			return operatorMetrics{}, fmt.Errorf("scraping /metrics of pod %s/%s (port %d): %w", p.Namespace, p.Name, port, err)
		}
		out.Samples = append(out.Samples, samples...)
	}
	return out, nil
}

// scrapePod GETs the pod's /metrics as a user's Prometheus does.
func (o operator) scrapePod(ctx context.Context, c *suite.Cluster, p *corev1.Pod, port int32) (metrics.Samples, error) {
	return o.metricsReader(c).ScrapePod(ctx, p, port, func(ctx context.Context) (net.Conn, error) { return c.DialPod(ctx, p, port) })
}

// creates is dynamo_webhook_requests_total{webhook, operation="CREATE", result}.
func (m operatorMetrics) creates(webhook, result string) float64 {
	return m.Sum(metricRequests, map[string]string{labelWebhook: webhook, labelOperation: operationCreate, labelResult: result})
}

// requestCounts describes a webhook's CREATE counters by result, for messages.
func (m operatorMetrics) requestCounts(webhook string) string {
	var parts []string
	for _, r := range []string{resultAllowed, resultDenied, resultSkipped, "error"} {
		parts = append(parts, fmt.Sprintf("%s=%g", r, m.creates(webhook, r)))
	}
	return fmt.Sprintf("%s{webhook=%q,operation=%q}: %s", metricRequests, webhook, operationCreate, strings.Join(parts, " "))
}

// logEntry is one JSON line of an operator's log (controller-runtime's zap encoder), reduced
// to the fields the scenarios read.
type logEntry struct {
	Pod       string  `json:"-"`
	Msg       string  `json:"msg"`
	Kind      string  `json:"kind"`
	Name      string  `json:"name"`
	Namespace string  `json:"namespace"`
	Result    string  `json:"result"`
	Error     string  `json:"error"`
	Time      logTime `json:"ts"`
}

// logTime is a log line's "ts": an RFC 3339 string — with nanoseconds as the chart sets it
// (--zap-time-encoding=rfc3339nano), whole seconds by controller-runtime's default — or epoch
// seconds (--zap-time-encoding=epoch); zero when it is neither.
type logTime struct{ time.Time }

func (l *logTime) UnmarshalJSON(b []byte) error {
	var secs float64
	if json.Unmarshal(b, &secs) == nil {
		l.Time = time.Unix(0, int64(secs*float64(time.Second)))
		return nil
	}
	var s string
	if json.Unmarshal(b, &s) == nil {
		l.Time, _ = time.Parse(time.RFC3339Nano, s)
	}
	return nil
}

func (e logEntry) String() string {
	s := fmt.Sprintf("%s: %q %s %s/%s", e.Pod, e.Msg, e.Kind, e.Namespace, e.Name)
	if e.Result != "" {
		s += " result=" + e.Result
	}
	return s
}

// readLog hands add every JSON line of pod's log r, with the pod's name.
func readLog(pod string, r io.Reader, add func(logEntry)) error {
	return jsonlog.Read(r, func(e logEntry) {
		e.Pod = pod
		add(e)
	})
}

// readLogs reads the logs of every current pod of the operator once.
func (o operator) readLogs(ctx context.Context, c *suite.Cluster) ([]logEntry, error) {
	pods, err := release.OperatorPods(ctx, c.Kube(), o.rel)
	if err != nil {
		return nil, err
	}
	var out []logEntry
	for _, p := range pods {
		rc, err := c.Kube().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: operatorContainer}).Stream(ctx)
		if err != nil {
			if p.Status.Phase != corev1.PodRunning {
				continue // not started yet, or gone: it has nothing to say about this request
			}
			return nil, fmt.Errorf("reading the log of %s pod %s/%s: %w", o, p.Namespace, p.Name, err)
		}
		err = readLog(p.Name, rc, func(e logEntry) { out = append(out, e) })
		_ = rc.Close() // a log stream, read to its end or to readLog's error
		if err != nil {
			return nil, fmt.Errorf("reading the log of %s pod %s/%s: %w", o, p.Namespace, p.Name, err)
		}
	}
	return out, nil
}

// admissionsOf are the `msg` lines (validate create, default) about object ns/name.
func admissionsOf(entries []logEntry, msg, ns, name string) []logEntry {
	var out []logEntry
	for _, e := range entries {
		if e.Msg == msg && e.Namespace == ns && e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// results lists the result fields of entries, for messages.
func results(entries []logEntry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Result)
	}
	return out
}

// logFollower follows the logs of every pod an operator has while it runs, including pods
// that start later and pods that are killed (their lines are kept), so that a failover's whole
// story can be read afterwards.
type logFollower struct {
	op     operator
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	byPod   map[string][]logEntry
	errs    map[string]string // pod → last stream error, for messages
	started map[string]bool
}

// follow starts following o's logs until stop.
func (o operator) follow(ctx context.Context, c *suite.Cluster) *logFollower {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &logFollower{op: o, cancel: cancel, byPod: map[string][]logEntry{}, errs: map[string]string{}, started: map[string]bool{}}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			if pods, err := release.OperatorPods(ctx, c.Kube(), o.rel); err == nil {
				for _, p := range pods {
					f.mu.Lock()
					known := f.started[p.Name]
					f.started[p.Name] = true
					f.mu.Unlock()
					if !known {
						f.wg.Add(1)
						go f.stream(ctx, c, p.Namespace, p.Name)
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	return f
}

// stream follows one pod's log; each (re)connection reads the log from its start, so the
// pod's entries are replaced rather than appended twice.
func (f *logFollower) stream(ctx context.Context, c *suite.Cluster, ns, pod string) {
	defer f.wg.Done()
	for ctx.Err() == nil {
		rc, err := c.Kube().CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: operatorContainer, Follow: true}).Stream(ctx)
		if err == nil {
			f.mu.Lock()
			f.byPod[pod] = nil
			f.mu.Unlock()
			err = readLog(pod, rc, func(e logEntry) {
				f.mu.Lock()
				f.byPod[pod] = append(f.byPod[pod], e)
				f.mu.Unlock()
			})
			_ = rc.Close() // a log stream, read to its end or to readLog's error
		}
		if err != nil {
			f.mu.Lock()
			f.errs[pod] = err.Error()
			f.mu.Unlock()
		}
		if _, getErr := c.Kube().CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{}); apierrors.IsNotFound(getErr) {
			return // the pod is gone and its log with it; what was read is kept
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// entries are every line read so far, pod by pod in the order the pods were first seen.
func (f *logFollower) entries() []logEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	pods := make([]string, 0, len(f.byPod))
	for p := range f.byPod {
		pods = append(pods, p)
	}
	sort.Strings(pods)
	var out []logEntry
	for _, p := range pods {
		out = append(out, f.byPod[p]...)
	}
	return out
}

// pods are the pods whose logs were read, with the last stream error of each, for messages.
func (f *logFollower) pods() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var parts []string
	for p := range f.started {
		s := fmt.Sprintf("%s (%d lines)", p, len(f.byPod[p]))
		if e := f.errs[p]; e != "" {
			s += " last error: " + e
		}
		parts = append(parts, s)
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// stop ends every stream.
func (f *logFollower) stop() {
	f.cancel()
	f.wg.Wait()
}
