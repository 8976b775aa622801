package result

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// syntheticMetrics feeds vegeta 1,000 results spaced 1 ms apart with
// latencies 1 µs … 1000 µs, the last 10 answered 500 with an error.
func syntheticMetrics(buckets vegeta.Buckets) *vegeta.Metrics {
	m := &vegeta.Metrics{}
	if buckets != nil {
		m.Histogram = &vegeta.Histogram{Buckets: buckets}
	}
	t0 := time.Date(2025, 11, 21, 10, 0, 0, 0, time.UTC)
	for i := range 1000 {
		r := vegeta.Result{Code: 200, Timestamp: t0.Add(time.Duration(i) * time.Millisecond), Latency: time.Duration(i+1) * time.Microsecond}
		if i >= 990 {
			r.Code = 500
			r.Error = "500 Internal Server Error"
		}
		m.Add(&r)
	}
	return m
}

func TestFromMetrics(t *testing.T) {
	spec := StepSpec{Name: "direct/validate", Mode: Direct, Target: "/validate-nvidia-com-v1alpha1-dynamographdeployment", Rate: 1000}
	s := FromMetrics(spec, syntheticMetrics(nil))

	assert.Equal(t, spec, s.StepSpec)
	assert.Equal(t, uint64(1000), s.Requests)
	assert.InDelta(t, 0.99, s.SuccessRatio, 1e-12)
	assert.InDelta(t, 0.999, s.DurationSeconds, 1e-12)
	assert.InDelta(t, 1000, s.AchievedRate, 2)
	assert.InDelta(t, 990, s.Throughput, 2)
	assert.InDelta(t, 0.001, s.MinMs, 1e-12)
	assert.InDelta(t, 1.0, s.MaxMs, 1e-12)
	assert.InDelta(t, 0.5005, s.MeanMs, 1e-9)
	// t-digest estimates; within 1 % of the exact order statistics.
	assert.InDelta(t, 0.500, s.P50Ms, 0.01)
	assert.InDelta(t, 0.900, s.P90Ms, 0.01)
	assert.InDelta(t, 0.950, s.P95Ms, 0.01)
	assert.InDelta(t, 0.990, s.P99Ms, 0.01)
	assert.Equal(t, map[string]int{"200": 990, "500": 10}, s.StatusCodes)
	assert.Equal(t, []string{"500 Internal Server Error"}, s.Errors)
	assert.Nil(t, s.Histogram)

	// 1,000 requests resolve quantiles up to 0.999, then the curve ends at max.
	require.NotEmpty(t, s.Percentiles)
	first, last := s.Percentiles[0], s.Percentiles[len(s.Percentiles)-1]
	assert.Equal(t, Percentile{Quantile: 0, Ms: s.MinMs}, first)
	assert.Equal(t, Percentile{Quantile: 1, Ms: s.MaxMs}, last)
	assert.InDelta(t, 0.999, s.Percentiles[len(s.Percentiles)-2].Quantile, 1e-9)
	for i := 1; i < len(s.Percentiles); i++ {
		assert.GreaterOrEqual(t, s.Percentiles[i].Quantile, s.Percentiles[i-1].Quantile)
		assert.GreaterOrEqualf(t, s.Percentiles[i].Ms, s.Percentiles[i-1].Ms, "curve decreases at q=%v", s.Percentiles[i].Quantile)
	}
}

func TestFromMetricsHistogram(t *testing.T) {
	var buckets vegeta.Buckets
	require.NoError(t, buckets.UnmarshalText([]byte("[0,250us,500us,750us]")))
	s := FromMetrics(StepSpec{Name: "x", Mode: Direct, Rate: 1000}, syntheticMetrics(buckets))

	require.Len(t, s.Histogram, 4)
	assert.InDelta(t, 0.0, s.Histogram[0].FromMs, 1e-9)
	require.NotNil(t, s.Histogram[0].ToMs)
	assert.InDelta(t, 0.25, *s.Histogram[0].ToMs, 1e-9)
	assert.Nil(t, s.Histogram[3].ToMs, "last bucket is open-ended")
	var total uint64
	for _, b := range s.Histogram {
		total += b.Count
	}
	assert.Equal(t, uint64(1000), total)
	assert.Equal(t, uint64(249), s.Histogram[0].Count, "1 µs … 249 µs")
	assert.Equal(t, uint64(251), s.Histogram[3].Count, "750 µs … 1000 µs")
}

func TestFromMetricsCapsErrors(t *testing.T) {
	m := &vegeta.Metrics{}
	for i := range 100 {
		m.Add(&vegeta.Result{Code: 0, Timestamp: time.Unix(int64(i), 0), Latency: time.Millisecond,
			Error: fmt.Sprintf("dial tcp 127.0.0.1:%d: connection refused", 40000+i)})
	}
	s := FromMetrics(StepSpec{Name: "x", Mode: Direct, Rate: 1}, m)
	assert.Len(t, s.Errors, MaxErrors)
	assert.InDelta(t, 0.0, s.SuccessRatio, 1e-9)
}

func TestFromMetricsWithoutRequests(t *testing.T) {
	s := FromMetrics(StepSpec{Name: "x", Mode: Direct, Rate: 1}, &vegeta.Metrics{})
	assert.Zero(t, s.Requests)
	assert.Empty(t, s.Percentiles)
}

func TestResultFileRoundTrip(t *testing.T) {
	to := 0.5
	in := Result{
		Run:               "20251121-100000",
		StartedAt:         time.Date(2025, 11, 21, 10, 0, 0, 0, time.UTC),
		Machine:           Machine{Hostname: "ci-1", CPUModel: "AMD EPYC", Cores: 2, MemoryBytes: 8 << 30, OS: "linux", Arch: "amd64", GoVersion: "go1.26.8"},
		GitRevision:       "6f60e50",
		KubernetesVersion: "v1.37.0",
		Provider:          "local",
		Settings:          map[string]string{"warmup": "2s", "invalidRatio": "0.2"},
		Steps: []Step{{
			StepSpec: StepSpec{Name: "apiserver/dgd", Mode: APIServer, Target: "dynamographdeployments.nvidia.com", Rate: 200, Control: "apiserver/control"},
			Requests: 2000, SuccessRatio: 1, P50Ms: 3, P99Ms: 7.5, MaxMs: 12,
			Percentiles: []Percentile{{0, 1}, {1, 12}},
			Histogram:   []Bucket{{FromMs: 0, ToMs: &to, Count: 3}, {FromMs: 0.5, Count: 1}},
			ServerHistograms: []ServerHistogram{{Source: "apiserver", Metric: "apiserver_admission_webhook_admission_duration_seconds",
				Labels: map[string]string{"name": "vdynamographdeployment.nvidia.com"}, Count: 2000, MeanMs: 0.8, P50Ms: 2.5, P90Ms: 4.5, P99Ms: 4.95}},
		}},
	}
	path := filepath.Join(t.TempDir(), "run", FileName)
	require.NoError(t, Write(path, in))
	out, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, in, out)

	raw, err := os.ReadFile(path) //nolint:gosec // G304: the file Write just wrote under t.TempDir()
	require.NoError(t, err)
	for _, key := range []string{`"p99Ms": 7.5`, `"successRatio": 1`, `"name": "apiserver/dgd"`, `"cpuModel": "AMD EPYC"`, `"gitRevision"`, `"kubernetesVersion": "v1.37.0"`,
		`"invalidRatio": "0.2"`, `"serverHistograms"`, `"source": "apiserver"`} {
		assert.Contains(t, string(raw), key)
	}
	assert.NotContains(t, string(raw), `"StepSpec"`, "the spec's fields are inlined in the step")
}

func TestValidateRejectsAmbiguousSteps(t *testing.T) {
	r := Result{Run: "r", Steps: []Step{
		{StepSpec: StepSpec{Name: "direct/validate", Mode: Direct, Rate: 100}},
		{StepSpec: StepSpec{Name: "direct/validate", Mode: Direct, Rate: 100}},
	}}
	require.EqualError(t, r.Validate(), "result r: step direct/validate@100 appears twice")

	r.Steps[1].Mode = "udp"
	r.Steps[1].Rate = 200
	require.EqualError(t, r.Validate(), `result r: step direct/validate@200 has mode "udp", want direct or apiserver`)

	_, err := Decode(strings.NewReader(`{"run":"r","steps":[{"name":"x","mode":"direct","rate":0}]}`))
	assert.EqualError(t, err, "result r: step x has rate 0, want > 0")
}

func TestLaddersAndMaxRateUnder(t *testing.T) {
	r := run("r",
		step("direct/validate", 1000, 0.9, 1),
		step("direct/validate", 100, 0.4, 1),
		step("direct/mutate", 100, 0.3, 1),
		step("direct/validate", 2000, 1.6, 1),
		step("direct/validate", 500, 0.6, 1),
	)
	ls := r.Ladders()
	require.Len(t, ls, 2)
	assert.Equal(t, "direct/validate", ls[0].Name)
	var rates []float64
	for _, s := range ls[0].Steps {
		rates = append(rates, s.Rate)
	}
	assert.Equal(t, []float64{100, 500, 1000, 2000}, rates)

	rate, ok := ls[0].MaxRateUnder(1.0)
	assert.True(t, ok)
	assert.InDelta(t, 1000.0, rate, 1e-9)

	_, ok = ls[0].MaxRateUnder(0.1)
	assert.False(t, ok)

	// A failing request disqualifies the step and every rate above it.
	ls[0].Steps[1].SuccessRatio = 0.999
	rate, _ = ls[0].MaxRateUnder(10)
	assert.InDelta(t, 100.0, rate, 1e-9)
}

func TestOverheads(t *testing.T) {
	dgd := step("apiserver/dgd", 200, 6, 1)
	dgd.Mode, dgd.Control, dgd.P50Ms, dgd.P90Ms = APIServer, "apiserver/control", 3.5, 5
	ctl := step("apiserver/control", 200, 4.5, 1)
	ctl.Mode, ctl.P50Ms, ctl.P90Ms = APIServer, 2.5, 3.5
	lone := step("apiserver/dgd", 400, 9, 1) // the control ladder stopped earlier
	lone.Mode, lone.Control = APIServer, "apiserver/control"

	got := run("r", dgd, ctl, lone).Overheads(APIServer)
	require.Len(t, got, 1)
	assert.Equal(t, "apiserver/dgd", got[0].Name)
	assert.InDelta(t, 200.0, got[0].Rate, 1e-9)
	assert.InDelta(t, 1.0, got[0].P50Ms, 1e-12)
	assert.InDelta(t, 1.5, got[0].P90Ms, 1e-12)
	assert.InDelta(t, 1.5, got[0].P99Ms, 1e-12)
}

func TestParseCPUModel(t *testing.T) {
	x86 := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
	assert.Equal(t, "AMD EPYC 7B13", parseCPUModel(strings.NewReader(x86)))

	arm := "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"
	assert.Equal(t, "implementer 0x41 part 0xd0c", parseCPUModel(strings.NewReader(arm)))

	assert.Empty(t, parseCPUModel(strings.NewReader("")))
}

func TestParseLoadAverage(t *testing.T) {
	v, ok := parseLoadAverage("4.35 3.13 3.85 3/812 27045\n")
	assert.True(t, ok)
	assert.InDelta(t, 4.35, v, 1e-9)
	_, ok = parseLoadAverage("")
	assert.False(t, ok)
}

func TestParseMemTotal(t *testing.T) {
	assert.Equal(t, uint64(24684096*1024), parseMemTotal(strings.NewReader("MemTotal:       24684096 kB\nMemFree:  1 kB\n")))
	assert.Equal(t, uint64(0), parseMemTotal(strings.NewReader("MemFree: 1 kB\n")))
}

func TestDescribeMachine(t *testing.T) {
	m := DescribeMachine()
	assert.Positive(t, m.Cores)
	assert.NotEmpty(t, m.OS)
	assert.NotEmpty(t, m.Arch)
	assert.True(t, strings.HasPrefix(m.GoVersion, "go"))
	if _, err := os.Stat("/proc/meminfo"); err == nil {
		assert.Positive(t, m.MemoryBytes)
		assert.NotEmpty(t, m.CPUModel)
	}
	assert.Contains(t, m.String(), fmt.Sprintf("%d cores", m.Cores))
}

func TestGitRevision(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed to record the measured revision: %v", err)
	}
	dir := t.TempDir()
	gitRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...) //nolint:gosec // G204: git in the test's scratch repository
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	gitRun("init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("a"), 0o600))
	gitRun("add", "f")
	gitRun("commit", "-q", "-m", "first")

	rev, err := GitRevision(context.Background(), dir)
	require.NoError(t, err)
	assert.Regexp(t, `^[0-9a-f]{40}$`, rev)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "untracked"), []byte("x"), 0o600))
	rev2, err := GitRevision(context.Background(), dir)
	require.NoError(t, err)
	assert.Equal(t, rev, rev2, "untracked files do not make the tree dirty")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("b"), 0o600))
	rev3, err := GitRevision(context.Background(), dir)
	require.NoError(t, err)
	assert.Equal(t, rev+"-dirty", rev3)

	_, err = GitRevision(context.Background(), t.TempDir())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "running git rev-parse HEAD in")
}

func TestReadAllOrdersRunsByStart(t *testing.T) {
	dir := t.TempDir()
	for i, day := range []int{3, 1, 2} {
		r := Result{Run: fmt.Sprintf("run-%d", i), StartedAt: time.Date(2026, 11, day, 2, 0, 0, 0, time.UTC),
			Steps: []Step{{StepSpec: StepSpec{Name: "direct/validate", Mode: Direct, Rate: 100}, Requests: 1, SuccessRatio: 1}}}
		require.NoError(t, Write(filepath.Join(dir, r.Run, FileName), r))
	}
	runs, err := ReadAll(dir)
	require.NoError(t, err)
	require.Len(t, runs, 3)
	assert.Equal(t, []string{"run-1", "run-2", "run-0"}, []string{runs[0].Run, runs[1].Run, runs[2].Run})

	_, err = ReadAll(t.TempDir())
	require.ErrorContains(t, err, "no result.json in")
}
