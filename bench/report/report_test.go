package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/gauntlet-dev/gauntlet/bench/result"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report/reporttest"
)

// attack simulates one constant-rate attack of two seconds whose latencies
// are log-normal around medianMs, with a tail that grows with the rate, and
// turns it into a Step through vegeta's own Metrics.
func attack(rng *rand.Rand, spec result.StepSpec, medianMs float64, failures int) result.Step {
	m := &vegeta.Metrics{}
	n := int(spec.Rate * 2)
	t0 := time.Date(2025, 11, 21, 10, 0, 0, 0, time.UTC)
	sigma := 0.3 + spec.Rate/4000
	for i := range n {
		lat := medianMs * math.Exp(rng.NormFloat64()*sigma)
		r := vegeta.Result{
			Code:      200,
			Timestamp: t0.Add(time.Duration(float64(i) / spec.Rate * float64(time.Second))),
			Latency:   time.Duration(lat * float64(time.Millisecond)),
		}
		if i < failures {
			r.Code, r.Error = 0, "Post \"https://127.0.0.1:9443/validate\": context deadline exceeded"
		}
		m.Add(&r)
	}
	return result.FromMetrics(spec, m)
}

func syntheticResult() result.Result {
	rng := rand.New(rand.NewPCG(7, 7)) //nolint:gosec // G404: a fixed seed for reproducible synthetic data, not for security
	r := result.Result{
		Run:               "20251121-100000",
		StartedAt:         time.Date(2025, 11, 21, 10, 0, 0, 0, time.UTC),
		Machine:           result.Machine{Hostname: "bench-1", CPUModel: "AMD EPYC", Cores: 2, MemoryBytes: 24 << 30, OS: "linux", Arch: "amd64", GoVersion: "go1.26.8"},
		GitRevision:       "6f60e50a1b2c3d4e5f60718293a4b5c6d7e8f901",
		KubernetesVersion: "v1.37.0",
		Provider:          "local",
	}
	for _, rate := range []float64{100, 200, 500, 1000, 2000} {
		r.Steps = append(r.Steps,
			attack(rng, result.StepSpec{Name: "direct/validate", Mode: result.Direct, Target: "/validate-nvidia-com-v1alpha1-dynamographdeployment", Rate: rate}, 0.25+rate/4000, 0),
			attack(rng, result.StepSpec{Name: "direct/mutate", Mode: result.Direct, Target: "/mutate-nvidia-com-v1alpha1-dynamographdeployment", Rate: rate}, 0.2+rate/5000, 0),
		)
	}
	for _, rate := range []float64{50, 100, 200, 400} {
		fails := 0
		if rate == 400 {
			fails = 3
		}
		r.Steps = append(r.Steps,
			attack(rng, result.StepSpec{Name: "apiserver/dynamographdeployments", Mode: result.APIServer, Target: "dynamographdeployments.nvidia.com", Rate: rate, Control: "apiserver/configmaps"}, 3+rate/200, fails),
			attack(rng, result.StepSpec{Name: "apiserver/configmaps", Mode: result.APIServer, Target: "configmaps", Rate: rate}, 2+rate/250, 0),
		)
	}
	return r
}

// svgDoc walks an SVG with encoding/xml, failing on any well-formedness error,
// and collects what a reader of the plot would see.
type svgDoc struct {
	root        xml.StartElement
	series      []string // data-series attributes in document order
	panelTitles []string
	axisLabels  []string
	ticks       []string
	texts       []string
	polylines   []string // points attributes
	width       float64
	height      float64
}

func parseSVG(t *testing.T, data []byte) svgDoc {
	t.Helper()
	var d svgDoc
	dec := xml.NewDecoder(bytes.NewReader(data))
	var stack []xml.StartElement
	first := true
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "SVG must be well-formed XML")
		switch el := tok.(type) {
		case xml.StartElement:
			if first {
				d.root = el.Copy()
				first = false
				d.width, _ = strconv.ParseFloat(attr(el, "width"), 64)
				d.height, _ = strconv.ParseFloat(attr(el, "height"), 64)
			}
			stack = append(stack, el.Copy())
			if s := attr(el, "data-series"); s != "" {
				d.series = append(d.series, s)
			}
			if el.Name.Local == "polyline" {
				d.polylines = append(d.polylines, attr(el, "points"))
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) == 0 || stack[len(stack)-1].Name.Local != "text" {
				continue
			}
			text := string(el)
			d.texts = append(d.texts, text)
			switch attr(stack[len(stack)-1], "class") {
			case "panel-title":
				d.panelTitles = append(d.panelTitles, text)
			case "axis-label":
				d.axisLabels = append(d.axisLabels, text)
			case "tick":
				d.ticks = append(d.ticks, text)
			}
		}
	}
	require.False(t, first, "SVG has no root element")
	return d
}

func attr(el xml.StartElement, name string) string {
	for _, a := range el.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// assertPointsInside checks every polyline vertex is a finite number inside
// the canvas: NaN or an off-canvas point means a scale bug.
func assertPointsInside(t *testing.T, d svgDoc) {
	t.Helper()
	for _, pl := range d.polylines {
		for _, p := range strings.Fields(pl) {
			xs, ys, ok := strings.Cut(p, ",")
			require.True(t, ok, "point %q", p)
			x, err := strconv.ParseFloat(xs, 64)
			require.NoError(t, err)
			y, err := strconv.ParseFloat(ys, 64)
			require.NoError(t, err)
			assert.True(t, x >= 0 && x <= d.width && y >= 0 && y <= d.height, "point %v,%v outside %vx%v", x, y, d.width, d.height)
		}
	}
}

func TestLatencyVsRateSVG(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, LatencyVsRateSVG(&b, syntheticResult()))
	d := parseSVG(t, b.Bytes())

	assert.Equal(t, "svg", d.root.Name.Local)
	assert.Equal(t, "http://www.w3.org/2000/svg", d.root.Name.Space)
	assert.Contains(t, d.texts, "Webhook latency vs. request rate")
	assert.Equal(t, []string{
		"direct/validate (direct: /validate-nvidia-com-v1alpha1-dynamographdeployment)",
		"direct/mutate (direct: /mutate-nvidia-com-v1alpha1-dynamographdeployment)",
		"apiserver/dynamographdeployments (apiserver: dynamographdeployments.nvidia.com)",
		"apiserver/configmaps (apiserver: configmaps)",
	}, d.panelTitles)

	perPanel := []string{"p50", "p90", "p95", "p99", "max"}
	var want []string
	for range 4 {
		want = append(want, perPanel...)
	}
	assert.Equal(t, want, d.series, "one line per percentile in every panel")
	for _, pl := range d.polylines[:5] {
		assert.Len(t, strings.Fields(pl), 5, "the direct ladders have five rates")
	}

	assert.Equal(t, 4, count(d.axisLabels, "requested rate (req/s)"))
	assert.Equal(t, 4, count(d.axisLabels, "latency (ms)"))
	for _, rate := range []string{"100", "200", "500", "1000", "2000", "50", "400"} {
		assert.Contains(t, d.ticks, rate, "measured rates label the x axis")
	}
	assertPointsInside(t, d)
}

func TestDistributionSVG(t *testing.T) {
	r := syntheticResult()
	var b bytes.Buffer
	require.NoError(t, DistributionSVG(&b, r))
	d := parseSVG(t, b.Bytes())

	assert.Contains(t, d.texts, "Webhook latency distribution")
	assert.Len(t, d.panelTitles, 4)
	assert.Equal(t, 4, count(d.axisLabels, "percentile"))
	for _, tk := range []string{"0%", "50%", "90%", "99%", "99.9%"} {
		assert.Contains(t, d.ticks, tk)
	}
	// One curve per rate, named with its maximum, which the log axis cannot show.
	validate2000 := r.Ladders()[0].Steps[4]
	assert.Contains(t, d.series, "2000 req/s (max "+formatMs(validate2000.MaxMs)+" ms)")
	assert.Len(t, d.series, 5+5+4+4)
	assertPointsInside(t, d)
}

func TestSVGWithoutSteps(t *testing.T) {
	for name, render := range map[string]func(io.Writer, result.Result) error{
		"latency-vs-rate": LatencyVsRateSVG, "distribution": DistributionSVG,
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, render(&b, result.Result{Run: "empty"}))
			d := parseSVG(t, b.Bytes())
			assert.Contains(t, d.texts, "no steps were measured")
			assert.Empty(t, d.series)
		})
	}
}

func TestSVGSingleStepAndNoDistribution(t *testing.T) {
	r := result.Result{Run: "one", Steps: []result.Step{{
		StepSpec: result.StepSpec{Name: "direct/validate", Mode: result.Direct, Rate: 1000},
		Requests: 10, SuccessRatio: 1, P50Ms: 0.4, P90Ms: 0.5, P95Ms: 0.6, P99Ms: 0.8, MaxMs: 0.9,
	}}}
	var b bytes.Buffer
	require.NoError(t, LatencyVsRateSVG(&b, r))
	d := parseSVG(t, b.Bytes())
	assert.Contains(t, d.ticks, "1000")
	assertPointsInside(t, d)

	b.Reset()
	require.NoError(t, DistributionSVG(&b, r))
	d = parseSVG(t, b.Bytes())
	assert.Contains(t, d.texts, "no latency distribution recorded for this ladder")
}

func TestMarkdownReport(t *testing.T) {
	r := syntheticResult()
	var b bytes.Buffer
	require.NoError(t, Markdown(&b, r, Options{
		P99TargetMs: map[string]float64{"direct/validate": 1, "apiserver/dynamographdeployments": 0.001},
		Plots:       []string{LatencyVsRateFile},
	}))
	md := b.String()
	lines := strings.Split(md, "\n")

	assert.Equal(t, "# Webhook latency benchmark — 20251121-100000", lines[0])
	assert.Contains(t, lines, "| Revision | `6f60e50a1b2c3d4e5f60718293a4b5c6d7e8f901` |")
	assert.Contains(t, lines, "| Kubernetes | v1.37.0 (local provider) |")
	assert.Contains(t, lines, "| Machine | bench-1 · AMD EPYC · 2 cores · 24.0 GiB · linux/amd64 · go1.26.8 |")

	// Every step has a row with its own numbers.
	for _, s := range r.Steps {
		row := "| " + s.Name + " | " + string(s.Mode) + " | " + s.Target + " | " + formatNumber(s.Rate) + " | "
		line := reporttest.LineStartingWith(t, lines, row)
		for _, v := range []string{formatMs(s.P50Ms), formatMs(s.P99Ms), formatMs(s.MaxMs), formatRatio(s.SuccessRatio), strconv.FormatUint(s.Requests, 10)} {
			assert.Contains(t, line, " "+v+" |", "row %q", row)
		}
	}
	// Golden row for one step, computed independently of the renderer.
	s := r.Ladders()[0].Steps[3] // direct/validate @ 1000
	assert.Contains(t, lines, "| direct/validate | direct | /validate-nvidia-com-v1alpha1-dynamographdeployment | 1000 | "+
		strconv.FormatFloat(s.AchievedRate, 'f', 1, 64)+" | "+strconv.FormatFloat(s.DurationSeconds, 'f', 1, 64)+" | 2000 | 100.00% | "+
		strconv.FormatFloat(s.Throughput, 'f', 1, 64)+" | "+strings.Join([]string{formatMs(s.P50Ms), formatMs(s.P90Ms), formatMs(s.P95Ms), formatMs(s.P99Ms), formatMs(s.MaxMs)}, " | ")+" |")
	// Ladders are grouped and ordered by rate.
	reporttest.InOrder(t, md, "| direct/validate | direct | /validate-nvidia-com-v1alpha1-dynamographdeployment | 100 |",
		"| direct/validate | direct | /validate-nvidia-com-v1alpha1-dynamographdeployment | 2000 |",
		"| direct/mutate | direct | /mutate-nvidia-com-v1alpha1-dynamographdeployment | 100 |")

	targets := reporttest.Section(t, md, "## Highest rate under the p99 target", "## Failed requests")
	assert.Regexp(t, `\| direct/validate \| 1\.00 \| \d+ req/s \|`, targets)
	assert.Contains(t, targets, "| apiserver/dynamographdeployments | 0.001 | none: the lowest rate already missed it |")

	failed := reporttest.Section(t, md, "## Failed requests", "## Admission overhead")
	assert.Contains(t, failed, "- **apiserver/dynamographdeployments @ 400 req/s**: 99.62% successful; status codes 0×3, 200×797")
	assert.Contains(t, failed, "  - `Post \"https://127.0.0.1:9443/validate\": context deadline exceeded`")

	overhead := reporttest.Section(t, md, "## Admission overhead through the API server", "## Plots")
	for _, rate := range []string{"50", "100", "200", "400"} {
		assert.Contains(t, overhead, "| apiserver/dynamographdeployments | apiserver/configmaps | "+rate+" | +")
	}
	assert.NotContains(t, md, "## Comparison with the baseline")
	assert.Contains(t, md, "![Latency percentiles vs. request rate](latency-vs-rate.svg)")
}

func TestMarkdownOverheadTargetSettingsAndServerHistograms(t *testing.T) {
	r := syntheticResult()
	r.Settings = map[string]string{"warmup": "2s", "invalidRatio": "0.2"}
	r.LoadAverage = &result.LoadAverage{Start: 4.35, End: 11.04}
	// Control p99 fixed, webhook p99 set so the overhead is +1.5 ms at 50
	// and +2.5 ms at 100 req/s.
	for i := range r.Steps {
		s := &r.Steps[i]
		switch {
		case s.Name == "apiserver/configmaps":
			s.P99Ms = 4
		case s.Name == "apiserver/dynamographdeployments" && s.Rate == 50:
			s.P99Ms = 5.5
		case s.Name == "apiserver/dynamographdeployments" && s.Rate == 100:
			s.P99Ms = 6.5
			s.ServerHistograms = []result.ServerHistogram{
				{Source: "apiserver", Metric: "apiserver_admission_webhook_admission_duration_seconds",
					Labels: map[string]string{"type": "validating", "name": "vdynamographdeployment.nvidia.com"}, Count: 200, MeanMs: 0.84, P50Ms: 2.5, P90Ms: 4.5, P99Ms: 4.95},
				{Source: "operator", Metric: "dynamo_webhook_request_duration_seconds",
					Labels: map[string]string{"webhook": "validate-dynamographdeployment"}, Count: 200, MeanMs: 0.007, P50Ms: 0.025, P90Ms: 0.045, P99Ms: 0.0495},
			}
		}
	}
	var b bytes.Buffer
	require.NoError(t, Markdown(&b, r, Options{OverheadP99TargetMs: 2, Plots: []string{LatencyVsRateFile}}))
	md := b.String()
	lines := strings.Split(md, "\n")

	assert.Contains(t, lines, "| Settings | invalidRatio=0.2, warmup=2s |")
	assert.Contains(t, lines, "| Load average (1 min) | 4.35 at the start, 11.04 at the end, on 2 cores |")
	overhead := reporttest.Section(t, md, "## Admission overhead through the API server", "## Server-side latency")
	assert.Contains(t, overhead, "Target: +p99 ≤ 2.00 ms.")
	assert.Regexp(t, `\| apiserver/dynamographdeployments \| apiserver/configmaps \| 50 \| [^|]+ \| [^|]+ \| \+1\.50 \| ✅ met \|`, overhead)
	assert.Regexp(t, `\| apiserver/dynamographdeployments \| apiserver/configmaps \| 100 \| [^|]+ \| [^|]+ \| \+2\.50 \| ❌ missed by 0\.500 ms \|`, overhead)

	server := reporttest.Section(t, md, "## Server-side latency (Prometheus histograms)", "## Plots")
	assert.Contains(t, server, "| apiserver/dynamographdeployments | 100 | apiserver | apiserver_admission_webhook_admission_duration_seconds | name=vdynamographdeployment.nvidia.com,type=validating | 200 | 0.840 | 2.50 | 4.50 | 4.95 |")
	assert.Contains(t, server, "| apiserver/dynamographdeployments | 100 | operator | dynamo_webhook_request_duration_seconds | webhook=validate-dynamographdeployment | 200 | 0.007 | 0.025 | 0.045 | 0.050 |")
	assert.Equal(t, 2, strings.Count(server, "| apiserver/dynamographdeployments | 100 |"), "only steps with histograms get rows")

	b.Reset()
	require.NoError(t, Markdown(&b, syntheticResult(), Options{}))
	assert.NotContains(t, b.String(), "## Server-side latency", "no histograms, no section")
	assert.NotContains(t, b.String(), "Target: +p99")
	assert.NotContains(t, b.String(), "| Settings |")
}

func TestMarkdownComparison(t *testing.T) {
	base := syntheticResult()
	cur := syntheticResult()
	cur.Run = "20251122-090000"
	cur.GitRevision = "abcdef"
	// Inject +5 ms into direct/validate at 1000 req/s and drop the last step.
	for i := range cur.Steps {
		if cur.Steps[i].Name == "direct/validate" && cur.Steps[i].Rate == 1000 {
			cur.Steps[i].P99Ms += 5
		}
	}
	cur.Steps = cur.Steps[:len(cur.Steps)-1] // apiserver/configmaps @ 400
	c := result.Compare(base, cur, result.DefaultTolerances())
	require.True(t, c.Failed())

	var b bytes.Buffer
	require.NoError(t, Markdown(&b, cur, Options{Comparison: &c}))
	cmp := b.String()[strings.Index(b.String(), "## Comparison with the baseline"):]
	assert.Contains(t, cmp, "**FAIL** — 1 regressed, 1 missing, 16 pass. Tolerances: p99 may grow by 100% when the increase exceeds 0.500 ms; p50 may grow by 50% when the increase exceeds 0.500 ms; a shift counts when a test over the windows gives p < 0.05; success ratio may drop by 0.1 points.")
	assert.Contains(t, cmp, "- Baseline: run 20251121-100000, revision `6f60e50a1b2c3d4e5f60718293a4b5c6d7e8f901`")
	assert.NotContains(t, cmp, "different machines")
	assert.Regexp(t, `\| ❌ regressed \| direct/validate \| 1000 \| [0-9.]+ \| [0-9.]+ \| — \| \+5\.00 \(\+\d+%\) \| 100\.00% \| 100\.00% \| p99 .* exceeds \+100% and the 0\.500 ms noise floor \|`, cmp)
	assert.Contains(t, cmp, "| ❌ missing | apiserver/configmaps | 400 | ")
	assert.Contains(t, cmp, " | — | — | — | ")
	assert.Contains(t, cmp, "| ✅ pass | apiserver/dynamographdeployments | 50 | 6.85 | 6.85 | ×1.00 | ", "steps with a control show the machine factor")

	var text bytes.Buffer
	require.NoError(t, ComparisonText(&text, c))
	tl := strings.Split(text.String(), "\n")
	assert.Equal(t, "bench-compare: FAIL — 1 regressed, 1 missing, 16 pass", tl[0])
	assert.True(t, strings.HasPrefix(tl[5], "VERDICT "), tl[5])
	assert.True(t, strings.HasPrefix(tl[6], "REGRESSED  direct/validate "), "failures come first: %q", tl[6])
	assert.True(t, strings.HasPrefix(tl[7], "MISSING    apiserver/configmaps "), tl[7])
}

func TestComparisonWarnsAboutDifferentMachines(t *testing.T) {
	base := syntheticResult()
	cur := syntheticResult()
	cur.Machine.CPUModel = "Apple M3"
	var b bytes.Buffer
	require.NoError(t, ComparisonMarkdown(&b, result.Compare(base, cur, result.DefaultTolerances())))
	assert.Contains(t, b.String(), "**PASS**")
	assert.Contains(t, b.String(), "The runs come from different machines")
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	paths, err := WriteFiles(dir, syntheticResult(), Options{})
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, ReportFile), filepath.Join(dir, LatencyVsRateFile), filepath.Join(dir, DistributionFile)}, paths)

	md, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	assert.Contains(t, string(md), "![Latency percentiles vs. request rate](latency-vs-rate.svg)")
	assert.Contains(t, string(md), "![Latency distribution per rate](latency-distribution.svg)")
	for _, p := range paths[1:] {
		data, err := os.ReadFile(p) //nolint:gosec // G304: a file WriteFiles wrote under the test's t.TempDir()
		require.NoError(t, err)
		parseSVG(t, data)
	}
}

func TestAxes(t *testing.T) {
	a := linearAxis("ms", 0, 0.87, 240, 22)
	assert.InDelta(t, 0.0, a.min, 1e-12)
	assert.InDelta(t, 1.0, a.max, 1e-12)
	var linear []string
	for _, tk := range a.ticks {
		linear = append(linear, tk.label)
	}
	assert.Equal(t, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}, linear, "1-2-5 steps, no float noise in labels")

	l := logAxis("ms", 0.23, 41, 240, 22)
	assert.InDelta(t, 0.2, l.min, 1e-12)
	assert.InDelta(t, 50.0, l.max, 1e-12)
	var labels []string
	for _, tk := range l.ticks {
		labels = append(labels, tk.label)
	}
	assert.Contains(t, labels, "1")
	assert.Contains(t, labels, "10")
	for i := 1; i < len(l.ticks); i++ {
		gap := l.pos(l.ticks[i].v, 0, 240) - l.pos(l.ticks[i-1].v, 0, 240)
		assert.GreaterOrEqual(t, gap, 22.0, "tick labels never collide")
	}
}

func count(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

func TestABReportOfATargetNamesBothVersionsAndItsTwoClusters(t *testing.T) {
	a, b := syntheticResult(), syntheticResult()
	a.Run, b.Run = "20261129-170000-ab-gatekeeper-a", "20261129-170000-ab-gatekeeper-b"
	a.Target = "gatekeeper github.com/open-policy-agent/gatekeeper/v3@v3.17.0"
	b.Target = "gatekeeper github.com/open-policy-agent/gatekeeper/v3@v3.23.1"
	for _, r := range []*result.Result{&a, &b} {
		for i := range r.Steps {
			r.Steps[i].Reference = strings.HasPrefix(r.Steps[i].Name, "apiserver/configmaps")
		}
	}
	c := result.CompareAB(a, b, result.DefaultABTolerances(), 1000)
	var buf bytes.Buffer
	// The ladder as its own floor: only the overhead section's names matter here.
	ladder := "apiserver/dynamographdeployments"
	require.NoError(t, ABMarkdown(&buf, c, a, b, Floors{Ladder: ladder, Floor: ladder}, [2]string{"a/report.md", "b/report.md"}))
	md := buf.String()
	assert.Contains(t, md, "## Side A: gatekeeper overhead against the floor")
	assert.Contains(t, md, "(gatekeeper's webhooks) as a multiple of the overhead of")
	assert.Contains(t, md, "| Rate (req/s) | gatekeeper +p50 | floor +p50 |")
	assert.NotContains(t, md, "operator")
	assert.Contains(t, md, "Side A: **gatekeeper github.com/open-policy-agent/gatekeeper/v3@v3.17.0** (bench revision `6f60e50a1b2c3d4e5f60718293a4b5c6d7e8f901`)")
	assert.Contains(t, md, "side B: **gatekeeper github.com/open-policy-agent/gatekeeper/v3@v3.23.1**")
	assert.Contains(t, md, "- Side A: run 20261129-170000-ab-gatekeeper-a, **gatekeeper github.com/open-policy-agent/gatekeeper/v3@v3.17.0**")
	assert.Contains(t, md, "Each side ran in a local cluster of its own")
	assert.Contains(t, md, "the clusters' difference; not judged")

	var text bytes.Buffer
	require.NoError(t, ComparisonText(&text, c))
	assert.Contains(t, text.String(), "baseline:   20261129-170000-ab-gatekeeper-a @ gatekeeper github.com/open-policy-agent/gatekeeper/v3@v3.17.0 on ")
}
