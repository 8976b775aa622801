package load

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exposition renders the apiserver's admission histogram (its real buckets)
// for two webhooks, the validating one split over two label sets that must be
// summed.
func exposition(validateAllowed, validateDenied, mutate [9]int, sums [3]float64) string {
	bounds := []string{"0.005", "0.025", "0.1", "0.5", "1", "2.5", "10", "25", "+Inf"}
	var b strings.Builder
	b.WriteString("# HELP apiserver_admission_webhook_admission_duration_seconds Admission webhook latency.\n")
	b.WriteString("# TYPE apiserver_admission_webhook_admission_duration_seconds histogram\n")
	series := []struct {
		labels string
		counts [9]int
		sum    float64
	}{
		{`name="v.example.com",operation="CREATE",rejected="false",type="validating"`, validateAllowed, sums[0]},
		{`name="v.example.com",operation="CREATE",rejected="true",type="validating"`, validateDenied, sums[1]},
		{`name="m.example.com",operation="CREATE",rejected="false",type="admit"`, mutate, sums[2]},
	}
	for _, s := range series {
		for i, le := range bounds {
			fmt.Fprintf(&b, "apiserver_admission_webhook_admission_duration_seconds_bucket{%s,le=%q} %d\n", s.labels, le, s.counts[i])
		}
		fmt.Fprintf(&b, "apiserver_admission_webhook_admission_duration_seconds_sum{%s} %g\n", s.labels, s.sum)
		fmt.Fprintf(&b, "apiserver_admission_webhook_admission_duration_seconds_count{%s} %d\n", s.labels, s.counts[8])
	}
	b.WriteString("# TYPE unrelated_total counter\nunrelated_total 3\n")
	return b.String()
}

func TestProbeMeasuresOnlyTheWindowBetweenScrapes(t *testing.T) {
	pages := []string{
		// Before: 10 + 5 validations and 10 mutations already happened.
		exposition([9]int{10, 10, 10, 10, 10, 10, 10, 10, 10}, [9]int{5, 5, 5, 5, 5, 5, 5, 5, 5},
			[9]int{10, 10, 10, 10, 10, 10, 10, 10, 10}, [3]float64{0.01, 0.005, 0.02}),
		// After: +90 allowed validations (all ≤ 5 ms), +10 denied (≤ 25 ms),
		// +100 mutations of which 98 ≤ 5 ms, 1 ≤ 25 ms, 1 ≤ 100 ms.
		exposition([9]int{100, 100, 100, 100, 100, 100, 100, 100, 100}, [9]int{5, 15, 15, 15, 15, 15, 15, 15, 15},
			[9]int{108, 109, 110, 110, 110, 110, 110, 110, 110}, [3]float64{0.1, 0.105, 0.22}),
	}
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Contains(t, r.Header.Get("Accept"), "text/plain")
		_, _ = fmt.Fprint(w, pages[served.Add(1)-1])
	}))
	defer srv.Close()
	p := Probe{Source: "apiserver", Client: srv.Client(), URL: srv.URL, Metric: "apiserver_admission_webhook_admission_duration_seconds", GroupBy: []string{"name", "type"}}

	before, err := p.Scrape(context.Background())
	require.NoError(t, err)
	after, err := p.Scrape(context.Background())
	require.NoError(t, err)
	got := after.Since(before)
	require.Len(t, got, 2)

	m, v := got[0], got[1]
	assert.Equal(t, map[string]string{"name": "m.example.com", "type": "admit"}, m.Labels)
	assert.Equal(t, uint64(100), m.Count)
	assert.InDelta(t, 2.0, m.MeanMs, 1e-9, "(0.22-0.02) s / 100")
	// Rank 50 of 100, all in (0, 5 ms]: 98 observations there, interpolated.
	assert.InDelta(t, 5*50.0/98, m.P50Ms, 1e-9)
	// Rank 99 lands in the (5, 25 ms] bucket holding one observation.
	assert.InDelta(t, 25, m.P99Ms, 1e-9)

	assert.Equal(t, map[string]string{"name": "v.example.com", "type": "validating"}, v.Labels)
	assert.Equal(t, "apiserver", v.Source)
	assert.Equal(t, uint64(100), v.Count, "allowed and denied series are summed")
	assert.InDelta(t, 1.9, v.MeanMs, 1e-9, "(0.1+0.105-0.01-0.005) s / 100")
	assert.InDelta(t, 5*50.0/90, v.P50Ms, 1e-9)
	assert.InDelta(t, 5+20*(99-90)/10.0, v.P99Ms, 1e-9)
}

func TestProbeSkipsGroupsWithoutObservationsInTheWindow(t *testing.T) {
	page := exposition([9]int{1, 1, 1, 1, 1, 1, 1, 1, 1}, [9]int{}, [9]int{}, [3]float64{0.001, 0, 0})
	p := Probe{Source: "apiserver", Metric: "apiserver_admission_webhook_admission_duration_seconds", GroupBy: []string{"name"}}
	s, err := p.parse(strings.NewReader(page))
	require.NoError(t, err)
	assert.Empty(t, s.Since(s), "nothing happened between two identical scrapes")

	empty, err := p.parse(strings.NewReader("# TYPE other_seconds histogram\n"))
	require.NoError(t, err)
	got := s.Since(empty)
	require.Len(t, got, 1, "a series absent before started at zero")
	assert.Equal(t, uint64(1), got[0].Count)
}

func TestProbeRefusesWhatItCannotSum(t *testing.T) {
	p := Probe{Source: "operator", Metric: "requests_total"}
	_, err := p.parse(strings.NewReader("# TYPE requests_total counter\nrequests_total 3\n"))
	require.ErrorContains(t, err, "requests_total is a COUNTER, not a histogram")

	p = Probe{Source: "operator", Metric: "d_seconds"}
	_, err = p.parse(strings.NewReader(`# TYPE d_seconds histogram
d_seconds_bucket{a="1",le="0.1"} 1
d_seconds_bucket{a="1",le="+Inf"} 1
d_seconds_sum{a="1"} 0.05
d_seconds_count{a="1"} 1
d_seconds_bucket{a="2",le="0.2"} 1
d_seconds_bucket{a="2",le="+Inf"} 1
d_seconds_sum{a="2"} 0.05
d_seconds_count{a="2"} 1
`))
	assert.ErrorContains(t, err, "different buckets")
}

func TestProbeScrapeErrorNamesSourceAndStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden: User \"bench\" cannot get path \"/metrics\"", http.StatusForbidden)
	}))
	defer srv.Close()
	_, err := Probe{Source: "apiserver", Client: srv.Client(), URL: srv.URL + "/metrics", Metric: "x"}.Scrape(context.Background())
	assert.ErrorContains(t, err, "scraping apiserver metrics "+srv.URL+"/metrics: HTTP 403: forbidden")
}

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	h := &histogram{bounds: []float64{0.001, 0.002, 0.004, inf}, counts: []float64{50, 50, 90, 100}}
	assert.InDelta(t, 0.0005, h.quantile(0.25), 1e-12, "inside the first bucket, from 0")
	assert.InDelta(t, 0.001, h.quantile(0.5), 1e-12, "exactly the first bucket's bound")
	assert.InDelta(t, 0.002+0.002*(80-50)/40.0, h.quantile(0.8), 1e-12, "an empty bucket is skipped")
	assert.InDelta(t, 0.004, h.quantile(0.99), 1e-12, "the +Inf bucket reports the highest finite bound")
	assert.True(t, math.IsNaN((&histogram{bounds: []float64{inf}, counts: []float64{0}}).quantile(0.5)))
}
