package load

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/bench/result"
)

// dryRunServer answers POSTs like the API server answers a dry-run create,
// stamping the object unless told not to, counts the requests it served, and
// exposes that count as a histogram at /metrics.
func dryRunServer(t *testing.T, stamp func(n int64) bool) (*httptest.Server, *atomic.Int64) {
	var served atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			n := served.Load()
			_, _ = fmt.Fprintf(w, "# TYPE handled_seconds histogram\nhandled_seconds_bucket{le=\"0.001\"} %d\nhandled_seconds_bucket{le=\"+Inf\"} %d\nhandled_seconds_sum %g\nhandled_seconds_count %d\n",
				n, n, float64(n)*0.0005, n)
			return
		}
		n := served.Add(1)
		obj := &unstructured.Unstructured{}
		var body bytes.Buffer
		_, _ = body.ReadFrom(r.Body)
		if err := obj.UnmarshalJSON(body.Bytes()); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if stamp(n) {
			obj.SetAnnotations(map[string]string{"example.com/stamp": "v1"})
		}
		out, _ := obj.MarshalJSON()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv, &served
}

func dryRunWorkload(t *testing.T, srv *httptest.Server, stamped bool) Workload {
	t.Helper()
	d, err := NewDryRun(DryRunConfig{URL: srv.URL + "/apis/example.com/v1/namespaces/bench/widgets?dryRun=All",
		Namespace: "bench", Object: widget(1), Annotation: "example.com/stamp", Stamped: stamped})
	require.NoError(t, err)
	return Workload{
		Spec:   result.StepSpec{Name: "apiserver/widgets", Mode: result.APIServer, Target: "widgets"},
		Client: srv.Client(), Target: d.Target, Check: d.Check,
		Probes: []Probe{{Source: "apiserver", Client: srv.Client(), URL: srv.URL + "/metrics", Metric: "handled_seconds"}},
	}
}

func TestRunStepCountsOnlyTheMeasuredWindow(t *testing.T) {
	srv, served := dryRunServer(t, func(int64) bool { return true })
	var out strings.Builder
	step, err := RunStep(context.Background(), dryRunWorkload(t, srv, true), 200,
		StepOptions{Warmup: 250 * time.Millisecond, Duration: 500 * time.Millisecond}, Progress{W: &out, Start: time.Now()})
	require.NoError(t, err)

	assert.Equal(t, "apiserver/widgets@200", step.Key())
	assert.Equal(t, uint64(100), step.Requests, "200 req/s for 0.5 s; the warm-up's 50 are not counted")
	// The warm-up's pacer stops on the clock: on a busy machine it sends fewer than its 50.
	assert.Greater(t, uint64(served.Load()), step.Requests, "the warm-up did run") //nolint:gosec // G115: a count of requests, never negative
	assert.LessOrEqual(t, served.Load(), int64(150), "200 req/s for 0.25 s of warm-up and 0.5 s measured")
	assert.InDelta(t, 1.0, step.SuccessRatio, 1e-9)
	require.Len(t, step.ServerHistograms, 1)
	assert.Equal(t, step.Requests, step.ServerHistograms[0].Count, "the server's window matches the measured attack")
	assert.Contains(t, out.String(), "apiserver/widgets @ 200 req/s: warm-up 250ms, then measuring 500ms …")
	assert.Contains(t, out.String(), "apiserver/widgets @ 200 req/s: p50 ")
}

func TestRunStepCountsWrongAnswersAsFailures(t *testing.T) {
	// Every fourth object comes back unstamped, as if the mutating webhook
	// had been skipped.
	srv, _ := dryRunServer(t, func(n int64) bool { return n%4 != 0 })
	step, err := RunStep(context.Background(), dryRunWorkload(t, srv, true), 100,
		StepOptions{Duration: 400 * time.Millisecond}, Progress{})
	require.NoError(t, err)
	assert.Equal(t, uint64(40), step.Requests)
	assert.InDelta(t, 0.75, step.SuccessRatio, 0.03)
	assert.Equal(t, []string{"Widget came back without example.com/stamp: the mutating webhook did not run"}, step.Errors)
	assert.InDelta(t, 10, step.StatusCodes["0"], 1, "wrong answers are counted under code 0")
	assert.InDelta(t, 30, step.StatusCodes["201"], 1)
}

func TestControlCheckWantsNoStamp(t *testing.T) {
	srv, _ := dryRunServer(t, func(int64) bool { return true })
	w := dryRunWorkload(t, srv, false)
	_, err := RunStep(context.Background(), w, 50, StepOptions{Warmup: 100 * time.Millisecond, Duration: 200 * time.Millisecond}, Progress{})
	assert.ErrorContains(t, err, "step apiserver/widgets@50: every warm-up request failed, e.g. control Widget came back with example.com/stamp: the webhooks were not bypassed")
}

func TestDryRunCheckQuotesTheAPIServersRefusal(t *testing.T) {
	d, err := NewDryRun(DryRunConfig{URL: "https://api.test/x", Namespace: "bench", Object: widget(1), Annotation: "a", Stamped: true})
	require.NoError(t, err)
	body := []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"admission webhook \"vwidget.example.com\" denied the request: spec.size: Invalid value","code":422}`)
	require.EqualError(t, d.Check(&vegeta.Result{Code: 422, Body: body}),
		`HTTP 422, want 201 Created: admission webhook "vwidget.example.com" denied the request: spec.size: Invalid value`)
	require.EqualError(t, d.Check(&vegeta.Result{Code: 201, Body: []byte(`{"kind":"Gadget"}`)}), `answer is a "Gadget", want Widget`)

	var tgt vegeta.Target
	require.NoError(t, d.Target(&tgt))
	require.NoError(t, d.Target(&tgt))
	assert.Contains(t, string(tgt.Body), `"name":"bench-1"`)
	assert.Contains(t, string(tgt.Body), `"namespace":"bench"`)
}

func TestRunStepRefusesFractionalRates(t *testing.T) {
	_, err := RunStep(context.Background(), Workload{Spec: result.StepSpec{Name: "x"}}, 2.5, StepOptions{Duration: time.Second}, Progress{})
	assert.EqualError(t, err, "step x@2.5: rate 2.5 must be a whole number of requests per second")
}
