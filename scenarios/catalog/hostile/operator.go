package hostile

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/metrics"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// watch is one scenario's view of the operator: what to send input to (env), the pod as it was
// before the input, and its resident memory, sampled while the input is sent.
type watch struct {
	*env
	id       string
	before   map[string]int32 // container → restartCount
	uid      types.UID
	rss      *rssSampler
	baseline float64
}

// startWatch discovers the environment and starts sampling the operator's memory.
func startWatch(ctx context.Context, t *testing.T, id string) *watch {
	t.Helper()
	e := discover(ctx, t)
	w := &watch{env: e, id: id, before: restartCounts(&e.pod), uid: e.pod.UID}
	rss, err := newRSSSampler(e)
	expect.NoError(t, err, "finding the operator's metrics port")
	w.rss = rss
	baseline, err := w.rss.read(ctx)
	expect.NoError(t, err, "reading the operator's resident memory before the input (process_resident_memory_bytes of pod %s/%s)", e.pod.Namespace, e.pod.Name)
	w.baseline = baseline
	w.rss.start(ctx)
	t.Cleanup(w.rss.stop)
	return w
}

// setup is the Setup step that starts a watch for scenario id into *w.
func setup(w **watch, id string) func(context.Context, *testing.T, *envconf.Config) context.Context {
	return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		*w = startWatch(ctx, t, id)
		return ctx
	}
}

// heldStep is the last assessment of every scenario: operatorHeld.
const heldStep = "the operator held: same pod, no restart, memory bounded, admission and conversion work afterwards"

func held(w **watch) func(context.Context, *testing.T, *envconf.Config) context.Context {
	return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		(*w).operatorHeld(ctx, t)
		return ctx
	}
}

func restartCounts(p *corev1.Pod) map[string]int32 {
	out := map[string]int32{}
	for _, s := range p.Status.ContainerStatuses {
		out[s.Name] = s.RestartCount
	}
	return out
}

// operatorHeld checks what hostile input must never do: replace or restart the operator's pod,
// take its memory past the bound, or break admission.
func (w *watch) operatorHeld(ctx context.Context, t *testing.T) {
	t.Helper()
	w.rss.stop()
	peak, samples, scrapeErr := w.rss.result()
	// The memory a request took may only show once it is answered: the reading after the
	// input counts too.
	if after, err := w.rss.read(ctx); err == nil {
		samples++
		peak = max(peak, after)
		suite.Note(ctx, t, "rssAfterMiB", mib(after))
	}
	suite.Note(ctx, t, "rssBeforeMiB", mib(w.baseline))
	suite.Note(ctx, t, "rssPeakMiB", mib(peak))
	if samples == 0 {
		expect.Errorf(t, "expected the operator's resident memory to be read while the input was sent; no sample: %v", scrapeErr)
	} else if peak > w.baseline+rssHeadroom {
		expect.Errorf(t, "expected the operator's resident memory to stay under %d MiB (%d MiB before the input + %d MiB) while the input was sent; saw %d MiB (process_resident_memory_bytes, %d samples)",
			mib(w.baseline+rssHeadroom), mib(w.baseline), rssHeadroom>>20, mib(peak), samples)
	}

	pod, err := w.c.Kube().CoreV1().Pods(w.pod.Namespace).Get(ctx, w.pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		expect.Errorf(t, "expected operator pod %s/%s to be there after the input; it is gone", w.pod.Namespace, w.pod.Name)
	case err != nil:
		expect.Errorf(t, "reading operator pod %s/%s: %v", w.pod.Namespace, w.pod.Name, err)
	case pod.UID != w.uid:
		expect.Errorf(t, "expected operator pod %s/%s to be the same pod after the input (UID %s); saw UID %s", w.pod.Namespace, w.pod.Name, w.uid, pod.UID)
	default:
		now := restartCounts(pod)
		for name, n := range w.before {
			if now[name] != n {
				expect.Errorf(t, "expected container %s of operator pod %s/%s not to restart during the input; restartCount was %d, is %d (%s)",
					name, pod.Namespace, pod.Name, n, now[name], release.PodState(pod))
			}
		}
		if !release.PodReady(pod) {
			expect.Errorf(t, "expected operator pod %s/%s to be Ready after the input; saw %s", pod.Namespace, pod.Name, release.PodState(pod))
		}
	}
	admissionWorks(ctx, t, w)
}

// admissionWorks checks, through the API server, that the operator still does its job: a
// valid DynamoGraphDeployment is admitted (and stamped by the mutating webhook), an invalid one
// is denied by the validating webhook, and a DynamoGraphDeploymentRequest written as v1beta1
// reads back as v1alpha1 (the conversion webhook).
func admissionWorks(ctx context.Context, t *testing.T, w *watch) {
	t.Helper()
	ns := suite.Namespace(ctx, t, strings.ToLower(w.id))
	dyn := w.c.Dynamic()
	got, err := dyn.Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, dynamo.GraphDeployment(ns, "valid"), metav1.CreateOptions{})
	if err != nil {
		expect.Errorf(t, "expected a valid DynamoGraphDeployment %s/valid to be admitted after the input; saw %v", ns, err)
	} else if _, ok := got.GetAnnotations()[dynamo.OriginVersionAnnotation]; !ok {
		expect.Errorf(t, "expected DynamoGraphDeployment %s/valid to be stamped with %s by the mutating webhook after the input; saw annotations %v",
			ns, dynamo.OriginVersionAnnotation, got.GetAnnotations())
	}
	denied := dynamo.DeniedBy(dynamo.GraphDeploymentValidatingWebhook)
	_, err = dyn.Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, dynamo.InvalidGraphDeployment(ns, "invalid"), metav1.CreateOptions{})
	switch {
	case err == nil:
		expect.Errorf(t, "expected DynamoGraphDeployment %s/invalid (no services) to be denied with %q after the input; it was admitted", ns, denied)
	case !strings.Contains(err.Error(), denied) || !strings.Contains(err.Error(), "at least one service is required"):
		expect.Errorf(t, "expected DynamoGraphDeployment %s/invalid (no services) to be denied with %q …at least one service is required; saw %v", ns, denied, err)
	}
	if _, err := dyn.Resource(dynamo.GraphDeploymentRequests).Namespace(ns).Create(ctx, dynamo.GraphDeploymentRequest(ns, "convert"), metav1.CreateOptions{}); err != nil {
		expect.Errorf(t, "expected a valid DynamoGraphDeploymentRequest %s/convert to be admitted after the input; saw %v", ns, err)
		return
	}
	alpha := schema.GroupVersionResource{Group: dynamo.Group, Version: "v1alpha1", Resource: "dynamographdeploymentrequests"}
	read, err := dyn.Resource(alpha).Namespace(ns).Get(ctx, "convert", metav1.GetOptions{})
	if err != nil {
		expect.Errorf(t, "expected DynamoGraphDeploymentRequest %s/convert (stored as v1beta1) to read as v1alpha1 through the conversion webhook after the input; saw %v", ns, err)
	} else if read.GetAPIVersion() != "nvidia.com/v1alpha1" {
		expect.Errorf(t, "expected DynamoGraphDeploymentRequest %s/convert read as v1alpha1 to be nvidia.com/v1alpha1; saw %s", ns, read.GetAPIVersion())
	}
}

func mib(b float64) int64 { return int64(b) >> 20 }

// rssSampler reads the operator's process_resident_memory_bytes as a user's Prometheus does —
// HTTPS with a ServiceAccount token allowed to get /metrics (metrics.Reader) — on a
// connection the provider opens to the pod, every rssInterval while the input is sent.
type rssSampler struct {
	scrape func(ctx context.Context) (metrics.Samples, error)

	mu      sync.Mutex
	peak    float64
	samples int
	lastErr error
	cancel  context.CancelFunc
	done    chan struct{}
}

const (
	rssInterval    = 250 * time.Millisecond
	rssReadTimeout = 10 * time.Second
	rssMetric      = "process_resident_memory_bytes"
)

func newRSSSampler(e *env) (*rssSampler, error) {
	pod := e.pod
	port, err := metrics.Port(&pod)
	if err != nil {
		return nil, err
	}
	reader := metrics.NewReader(e.c.Kube(), e.r)
	return &rssSampler{scrape: func(ctx context.Context) (metrics.Samples, error) {
		return reader.ScrapePod(ctx, &pod, port, func(ctx context.Context) (net.Conn, error) { return e.c.DialPod(ctx, &pod, port) })
	}}, nil
}

// read scrapes process_resident_memory_bytes once.
func (s *rssSampler) read(ctx context.Context) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, rssReadTimeout)
	defer cancel()
	samples, err := s.scrape(ctx)
	if err != nil {
		return 0, err
	}
	v, ok := samples.Value(rssMetric)
	if !ok {
		return 0, fmt.Errorf("no %s in /metrics", rssMetric)
	}
	return v, nil
}

func (s *rssSampler) start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		tick := time.NewTicker(rssInterval)
		defer tick.Stop()
		for {
			v, err := s.read(ctx)
			s.mu.Lock()
			if err == nil {
				s.samples++
				s.peak = max(s.peak, v)
			} else if ctx.Err() == nil {
				s.lastErr = err
			}
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// stop ends the sampling (idempotent).
func (s *rssSampler) stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
}

// result is the peak seen, the number of samples and the last scrape error.
func (s *rssSampler) result() (peak float64, samples int, lastErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.samples, s.lastErr
}

// peakMiB is the peak so far, for messages.
func (s *rssSampler) peakMiB() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return mib(s.peak)
}
