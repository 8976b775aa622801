// Package benchmark is what `make bench` runs: the rate ladders that measure
// the operator's webhooks directly and through the API server, on a testbed,
// written to a run directory as result.json, report.md and plots.
package benchmark

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/gauntlet-dev/gauntlet/bench/load"
	"github.com/gauntlet-dev/gauntlet/bench/report"
	"github.com/gauntlet-dev/gauntlet/bench/result"
	"github.com/gauntlet-dev/gauntlet/bench/testbed"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// Ladder names; comparisons match steps by name and rate, so these are part
// of the result format.
const (
	DirectValidate  = "direct/validate-dgd"
	DirectMutate    = "direct/mutate-dgd"
	DirectControl   = "direct/control"
	APIServerDGD    = "apiserver/dgd"
	APIServerDGDCtl = "apiserver/dgd-control"
	// APIServerTarget and APIServerTargetCtl are APIServerDGD and its control
	// for a target (gauntlet-bench ab --target): dry-run creates of its probe's
	// admitted object.
	APIServerTarget    = "apiserver/target"
	APIServerTargetCtl = "apiserver/target-control"
	// APIServerFloor is the same dry-run create through the floor webhook
	// (testbed.InstallFloor): the least any webhook behind a Service costs.
	APIServerFloor = "apiserver/floor"
	// APIServerFloorPatching is the same through the patching floor: the
	// floor's webhooks, the mutating one returning the operator's patch, so
	// that the API server applies one on this side too.
	APIServerFloorPatching = "apiserver/floor-patching"
	// APIServerFloorDirect is the same through the floor's webhooks called at
	// its pod's address (url:), bypassing the Service: against
	// APIServerFloor, the Service hop's cost.
	APIServerFloorDirect = "apiserver/floor-direct"
)

// Webhook paths of the DynamoGraphDeployment webhooks (the operator's
// kubebuilder markers).
const (
	validatePath = "/validate-nvidia-com-v1alpha1-dynamographdeployment"
	mutatePath   = "/mutate-nvidia-com-v1alpha1-dynamographdeployment"
	// notServedPath is a path the webhook server does not serve: the direct
	// control's requests cross the same TLS connection and HTTP server to a
	// 404, without a webhook.
	notServedPath = "/gauntlet-bench-control"
)

// Histograms scraped around every measured step.
const (
	OperatorHistogram  = "dynamo_webhook_request_duration_seconds"
	APIServerHistogram = "apiserver_admission_webhook_admission_duration_seconds"
)

// Config is one benchmark run's settings.
type Config struct {
	// DirectRates and APIServerRates are the ladders' rates in req/s,
	// ascending; an empty list skips that mode.
	DirectRates    []float64
	APIServerRates []float64
	// Warmup runs before every measured step at its rate, uncounted.
	Warmup time.Duration
	// Duration is each measured step's length.
	Duration time.Duration
	// Windows is how many equal time slices each measured step is cut into;
	// comparisons rank the slices' percentiles (result.Window).
	Windows int
	// Segments is how many segments each ladder of an A/B step is measured
	// in, taking turns with the other ladders (load.TurnPlan); even, at least 2.
	Segments int
	// SegmentWarmup is the uncounted warm-up before every segment of an A/B
	// step but each side's first (which gets Warmup).
	SegmentWarmup time.Duration
	// InvalidRatio is the fraction of direct requests carrying an invalid
	// DynamoGraphDeployment (denied by the validating webhook, still patched
	// by the mutating one).
	InvalidRatio float64
	// DirectP99TargetMs is the p99 the direct ladders must stay under; the
	// report names the highest rate that did.
	DirectP99TargetMs float64
	// OverheadP99TargetMs is the target for the admission overhead's p99
	// through the API server.
	OverheadP99TargetMs float64
	// FloorRatioGoal is the most the webhooks' admission overhead may be as a
	// multiple of the floor's and of the patching floor's, at p50 and p99;
	// the report judges every rate against it (report.Floors).
	FloorRatioGoal float64
	// SaturationP50 ends a ladder after a step whose p50 exceeds it: the
	// target no longer keeps up, and higher rates would only queue longer
	// (and take longer to measure). Zero never stops early.
	SaturationP50 time.Duration
	// ProfileRate, when positive and the testbed serves pprof, captures a CPU
	// profile of the operator during the direct validate step at this rate.
	ProfileRate float64
	// APIServerProfileRate, when positive, captures a CPU profile of the API
	// server (its /debug/pprof, with the admin credentials) during the
	// webhook dry-run step at this rate: where the admission overhead goes.
	APIServerProfileRate float64
	// ProfileDir receives the profiles (operator-cpu-<rate>.pprof,
	// apiserver-cpu-<rate>.pprof).
	ProfileDir string
	// ChartValues are the helm --set expressions the testbed was installed
	// with, recorded in the result (a run with an injected slowdown says so).
	ChartValues []string
	// Progress receives a line per step.
	Progress io.Writer
}

// Defaults are `make bench`'s settings: about 4½ minutes of attacks.
func Defaults() Config {
	return Config{
		DirectRates:         []float64{100, 250, 500, 1000, 1500, 2000},
		APIServerRates:      []float64{50, 100, 200, 300, 400},
		Warmup:              2 * time.Second,
		Duration:            10 * time.Second,
		Windows:             result.DefaultWindows,
		Segments:            4,
		SegmentWarmup:       500 * time.Millisecond,
		InvalidRatio:        0.2,
		DirectP99TargetMs:   1,
		OverheadP99TargetMs: 2,
		FloorRatioGoal:      1.3,
		SaturationP50:       time.Second,
	}
}

// ABDefaults are `make bench-compare`'s settings: Defaults with every step
// cut into 12 windows, 3 per segment. A run's tests are adjusted together
// (result.CompareAB), so a step slower at one rate alone must reach p < 0.05
// divided by the number of steps judged: 12 window pairs all lost give
// p = 0.00024, while 8 could not give less than 0.0039.
func ABDefaults() Config {
	c := Defaults()
	c.Windows = 12
	return c
}

// Smoke are the settings of the seconds-long smoke run: two rates per
// ladder, a second each. Its numbers prove the pipeline, not the latency.
func Smoke() Config {
	c := Defaults()
	c.DirectRates = []float64{100, 200}
	c.APIServerRates = []float64{20, 40}
	c.Warmup = 300 * time.Millisecond
	c.Duration = time.Second
	// Every step runs, so the pipeline's output has a fixed shape.
	c.SaturationP50 = 0
	return c
}

// Settings describes c for result.json.
func (c Config) Settings() map[string]string {
	return map[string]string{
		"directRates":         joinRates(c.DirectRates),
		"apiserverRates":      joinRates(c.APIServerRates),
		"warmup":              c.Warmup.String(),
		"duration":            c.Duration.String(),
		"windows":             strconv.Itoa(c.Windows),
		"invalidRatio":        strconv.FormatFloat(c.InvalidRatio, 'f', -1, 64),
		"directP99TargetMs":   strconv.FormatFloat(c.DirectP99TargetMs, 'f', -1, 64),
		"overheadP99TargetMs": strconv.FormatFloat(c.OverheadP99TargetMs, 'f', -1, 64),
		"floorRatioGoal":      strconv.FormatFloat(c.FloorRatioGoal, 'f', -1, 64),
		"chartValues":         strings.Join(c.ChartValues, ","),
		"saturationP50":       c.SaturationP50.String(),
	}
}

// Run measures tb with cfg and returns the complete result of run name: the
// steps, the machine, the workspace's git revision (when it can be read) and
// the settings.
func Run(ctx context.Context, tb *testbed.Testbed, cfg Config, name string) (result.Result, error) {
	res := result.Result{
		Run:               name,
		StartedAt:         time.Now().UTC(),
		Machine:           result.DescribeMachine(),
		KubernetesVersion: tb.KubernetesVersion,
		Provider:          tb.Provider,
		Settings:          cfg.Settings(),
	}
	if root, err := workspace.Root(); err == nil {
		if rev, err := result.GitRevision(ctx, root); err == nil {
			res.GitRevision = rev
		}
	}
	start, ok := result.ReadLoadAverage()
	steps, err := Measure(ctx, tb, cfg)
	res.Steps = steps
	if end, ok2 := result.ReadLoadAverage(); ok && ok2 {
		res.LoadAverage = &result.LoadAverage{Start: start, End: end}
	}
	return res, err
}

// Estimate is how long the attacks of c take on a local testbed (setup
// excluded): three direct ladders, and the webhook, control and three floor
// ladders (the floor, the patching floor, the floor at its pod's address)
// through the API server.
func (c Config) Estimate() time.Duration {
	steps := 3*len(c.DirectRates) + 5*len(c.APIServerRates)
	return time.Duration(steps) * (c.Warmup + c.Duration)
}

func joinRates(rates []float64) string {
	parts := make([]string, len(rates))
	for i, r := range rates {
		parts[i] = strconv.FormatFloat(r, 'f', -1, 64)
	}
	return strings.Join(parts, ",")
}

// Measure runs every ladder against tb, rate by rate: at each rate the
// direct validate, mutate and control steps, then (after the direct ladders)
// the API-server webhook and control steps. Interleaving a ladder with its
// control keeps the drift of the machine's load over the run from biasing
// either side of a comparison. The ladders of a mode stop after the rate at
// which one of their steps saturated. The result's machine, revision and run
// name are left to the caller.
func Measure(ctx context.Context, tb *testbed.Testbed, cfg Config) ([]result.Step, error) {
	progress := load.Progress{W: cfg.Progress, Start: time.Now()}
	opts := load.StepOptions{Warmup: cfg.Warmup, Duration: cfg.Duration, Windows: cfg.Windows}
	var steps []result.Step

	operatorProbe := load.Probe{Source: "operator", Client: tb.OperatorMetricsClient,
		URL: tb.OperatorMetricsURL, Metric: OperatorHistogram, GroupBy: []string{"webhook"}}

	if len(cfg.DirectRates) > 0 {
		direct, err := directWorkloads(tb, cfg, operatorProbe)
		if err != nil {
			return nil, err
		}
		ladder, err := climb(ctx, cfg, cfg.DirectRates, direct, opts, progress, func(w load.Workload, rate float64) func() error {
			if w.Spec.Name != DirectValidate || rate != cfg.ProfileRate || tb.OperatorPprofURL == "" {
				return nil
			}
			return startProfile(ctx, http.DefaultClient, tb.OperatorPprofURL, cfg.Warmup+cfg.Duration,
				filepath.Join(cfg.ProfileDir, fmt.Sprintf("operator-cpu-%g.pprof", rate)), progress)
		})
		steps = append(steps, ladder...)
		if err != nil {
			return steps, err
		}
	}

	if len(cfg.APIServerRates) > 0 {
		pair, err := apiServerWorkloads(tb, operatorProbe)
		if err != nil {
			return nil, err
		}
		pprofClient, err := tb.APIServerClient()
		if err != nil {
			return nil, err
		}
		base, _, err := rest.DefaultServerUrlFor(tb.REST)
		if err != nil {
			return nil, fmt.Errorf("API server URL of %s: %w", tb.REST.Host, err)
		}
		// The control step still runs at the rate the webhook step saturated,
		// so that rate's overhead is on record.
		ladder, err := climb(ctx, cfg, cfg.APIServerRates, pair, opts, progress, func(w load.Workload, rate float64) func() error {
			if w.Spec.Name != APIServerDGD || rate != cfg.APIServerProfileRate {
				return nil
			}
			return startProfile(ctx, pprofClient, strings.TrimSuffix(base.String(), "/")+"/debug/pprof/", cfg.Warmup+cfg.Duration,
				filepath.Join(cfg.ProfileDir, fmt.Sprintf("apiserver-cpu-%g.pprof", rate)), progress)
		})
		steps = append(steps, ladder...)
		if err != nil {
			return steps, err
		}
	}
	return steps, nil
}

// climb runs the workloads one after the other at each rate in turn, and stops after the rate
// at which one of them saturated. profile, called before each step, may start that step's CPU
// profile and return what waits for it (nil: no profile).
func climb(ctx context.Context, cfg Config, rates []float64, workloads []load.Workload, opts load.StepOptions, progress load.Progress,
	profile func(w load.Workload, rate float64) func() error) ([]result.Step, error) {
	var steps []result.Step
	for _, rate := range rates {
		saturated := false
		for _, w := range workloads {
			s, err := runStep(ctx, w, rate, opts, progress, profile(w, rate))
			if err != nil {
				return steps, err
			}
			steps = append(steps, s)
			saturated = cfg.saturated(s, progress) || saturated
		}
		if saturated {
			break
		}
	}
	return steps, nil
}

// runStep runs one step; profile, when not nil, waits for the CPU profile
// started alongside it. A profile that failed is reported, not fatal: the
// step's numbers stand without it.
func runStep(ctx context.Context, w load.Workload, rate float64, opts load.StepOptions, progress load.Progress, profile func() error) (result.Step, error) {
	s, err := load.RunStep(ctx, w, rate, opts, progress)
	if profile != nil {
		if perr := profile(); perr != nil {
			progress.Printf("CPU profile: %v", perr)
		}
	}
	return s, err
}

// saturated reports (and says) whether s ends its ladder.
func (c Config) saturated(s result.Step, progress load.Progress) bool {
	if c.SaturationP50 <= 0 || s.P50Ms <= float64(c.SaturationP50)/float64(time.Millisecond) {
		return false
	}
	progress.Printf("%s saturated at %g req/s (p50 %.0f ms > %s): its higher rates are skipped", s.Name, s.Rate, s.P50Ms, c.SaturationP50)
	return true
}

// directWorkloads are the AdmissionReview ladders against the operator's
// DynamoGraphDeployment validate and mutate paths and their control (the same
// requests to a path the server does not serve), over one keep-alive TLS
// client that trusts the webhook CA and checks the Service name, as the API
// server does.
func directWorkloads(tb *testbed.Testbed, cfg Config, probe load.Probe) ([]load.Workload, error) {
	client := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:     tb.WebhookTLS,
			ForceAttemptHTTP2:   false,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
	mix := fmt.Sprintf("%g%% invalid objects", cfg.InvalidRatio*100)
	var out []load.Workload
	for _, d := range []struct {
		name, path, control string
		mutating            bool
	}{
		{DirectValidate, validatePath, DirectControl, false},
		{DirectMutate, mutatePath, DirectControl, true},
		{DirectControl, notServedPath, "", false},
	} {
		a, err := load.NewAdmission(load.AdmissionConfig{
			// The API server appends the timeout the same way.
			URL:          tb.WebhookURL + d.path + "?timeout=10s",
			Mutating:     d.mutating,
			Resource:     schema.GroupVersionResource(dynamo.GraphDeployments),
			Namespace:    tb.WebhookNamespace,
			Valid:        dynamo.GraphDeployment,
			Invalid:      dynamo.InvalidGraphDeployment,
			InvalidRatio: cfg.InvalidRatio,
			DeniedField:  "spec.services",
			// The key without its prefix: a JSON patch path escapes the "/"
			// (nvidia.com~1dynamo-…), a patch adding the whole map does not.
			PatchContains: dynamo.OriginVersionAnnotation[strings.Index(dynamo.OriginVersionAnnotation, "/")+1:],
		})
		if err != nil {
			return nil, fmt.Errorf("ladder %s: %w", d.name, err)
		}
		w := load.Workload{
			Spec:   result.StepSpec{Name: d.name, Mode: result.Direct, Control: d.control, Target: "POST " + d.path + ", " + mix},
			Client: client,
			Target: a.Target,
			Check:  a.Check,
			Probes: []load.Probe{probe},
		}
		if d.name == DirectControl {
			w.Spec.Target = "POST " + d.path + " (not served: 404 without a webhook), " + mix
			w.Check = notFound
		}
		out = append(out, w)
	}
	return out, nil
}

// notFound accepts exactly the answer of a path the server does not serve.
func notFound(r *vegeta.Result) error {
	if r.Code != http.StatusNotFound {
		return fmt.Errorf("HTTP %d, want 404 Not Found from a path the webhook server does not serve", r.Code)
	}
	return nil
}

// apiServerWorkloads are the dry-run create ladders: the same valid
// DynamoGraphDeployment in the namespace the webhooks serve and in the
// control namespace their namespaceSelector skips.
func apiServerWorkloads(tb *testbed.Testbed, operatorProbe load.Probe) ([]load.Workload, error) {
	client, err := tb.APIServerClient()
	if err != nil {
		return nil, err
	}
	client.Timeout = 30 * time.Second
	base, _, err := rest.DefaultServerUrlFor(tb.REST)
	if err != nil {
		return nil, fmt.Errorf("API server URL of %s: %w", tb.REST.Host, err)
	}
	scrapeClient, err := tb.APIServerClient()
	if err != nil {
		return nil, err
	}
	apiProbe := load.Probe{Source: "apiserver", Client: scrapeClient, URL: strings.TrimSuffix(base.String(), "/") + "/metrics",
		Metric: APIServerHistogram, GroupBy: []string{"name", "type"}}
	gvr, object, annotation := dynamo.GraphDeployments, load.ObjectFunc(dynamo.GraphDeployment), dynamo.OriginVersionAnnotation
	webhook, control, called := APIServerDGD, APIServerDGDCtl, "webhooks called"
	probes := []load.Probe{apiProbe, operatorProbe}
	if o := tb.Object; o != nil {
		// A target's probe object; whether its webhooks ran shows in the API server's histogram.
		gvr, object, annotation = o.Resource, o.Object, ""
		webhook, control, called = APIServerTarget, APIServerTargetCtl, "webhooks called, from the probe of "+o.Probe+", "+o.Manifest
		probes = []load.Probe{apiProbe}
	}
	type dryRunLadder struct {
		name, ns, control, what string
		stamped                 bool
	}
	ladders := []dryRunLadder{
		{webhook, tb.WebhookNamespace, control, called, true},
		{control, tb.ControlNamespace, "", "webhooks skipped by namespaceSelector", false},
	}
	if tb.FloorNamespace != "" {
		ladders = append(ladders, dryRunLadder{APIServerFloor, tb.FloorNamespace, control, "floor webhooks only: allowed without decoding the object", false})
	}
	if tb.FloorPatchingNamespace != "" {
		ladders = append(ladders, dryRunLadder{APIServerFloorPatching, tb.FloorPatchingNamespace, control,
			"patching floor webhooks only: allowed without decoding the object, the mutating one returning the operator's patch", true})
	}
	if tb.FloorDirectNamespace != "" {
		ladders = append(ladders, dryRunLadder{APIServerFloorDirect, tb.FloorDirectNamespace, control,
			"floor webhooks only, called at the floor pod's address (url:), bypassing the Service", false})
	}
	var out []load.Workload
	for _, d := range ladders {
		path := fmt.Sprintf("/apis/%s/%s/namespaces/%s/%s", gvr.Group, gvr.Version, d.ns, gvr.Resource)
		if gvr.Group == "" {
			path = fmt.Sprintf("/api/%s/namespaces/%s/%s", gvr.Version, d.ns, gvr.Resource)
		}
		dr, err := load.NewDryRun(load.DryRunConfig{
			URL:        strings.TrimSuffix(base.String(), "/") + path + "?dryRun=All&fieldManager=gauntlet-bench",
			Namespace:  d.ns,
			Object:     object,
			Annotation: annotation,
			Stamped:    d.stamped,
		})
		if err != nil {
			return nil, fmt.Errorf("ladder %s: %w", d.name, err)
		}
		out = append(out, load.Workload{
			Spec: result.StepSpec{Name: d.name, Mode: result.APIServer, Control: d.control,
				Target: "dry-run create " + gvr.Resource + " in " + d.ns + " (" + d.what + ")"},
			Client: client,
			Target: dr.Target,
			Check:  dr.Check,
			Probes: probes,
		})
	}
	return out, nil
}

// Floors are the ladders the report relates the webhooks' overhead to in res:
// the dry-run ladder through the webhooks of what res measured (a target's
// probe object, or gauntlet's operator's DynamoGraphDeployment), the floors,
// and the goal.
func (c Config) Floors(res result.Result) report.Floors {
	ladder := APIServerDGD
	if res.Target != "" {
		ladder = APIServerTarget
	}
	return report.Floors{Ladder: ladder, Floor: APIServerFloor, Patching: APIServerFloorPatching, Direct: APIServerFloorDirect, Goal: c.FloorRatioGoal}
}

// startProfile fetches a CPU profile of length d from a pprof endpoint into
// path, in the background; the returned func waits for it.
func startProfile(ctx context.Context, client *http.Client, pprofURL string, d time.Duration, path string, progress load.Progress) func() error {
	done := make(chan error, 1)
	go func() {
		seconds := int(d.Round(time.Second) / time.Second)
		if seconds < 1 {
			seconds = 1
		}
		url := fmt.Sprintf("%sprofile?seconds=%d", pprofURL, seconds)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			done <- err
			return
		}
		ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
		defer cancel()
		resp, err := client.Do(req.WithContext(ctx))
		if err != nil {
			done <- fmt.Errorf("fetching %s: %w", url, err)
			return
		}
		defer func() { _ = resp.Body.Close() }() // copied to the file or abandoned; done has the outcome
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("fetching %s: HTTP %d", url, resp.StatusCode)
			return
		}
		f, err := os.Create(path) //nolint:gosec // G304: the profile's path in the run directory, chosen by the caller
		if err != nil {
			done <- err
			return
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			_ = f.Close() // the copy's error is the one to report
			done <- fmt.Errorf("writing %s: %w", path, err)
			return
		}
		done <- f.Close()
		progress.Printf("CPU profile written to %s (`go tool pprof -top %s`)", path, path)
	}()
	return func() error { return <-done }
}

// Targets maps ladder names to the p99 target the report checks them
// against: the direct ladders only (through the API server the target is on
// the overhead, not on the absolute latency).
func (c Config) Targets() map[string]float64 {
	return map[string]float64{DirectValidate: c.DirectP99TargetMs, DirectMutate: c.DirectP99TargetMs}
}

// Write writes res into dir: result.json, then report.md and its SVG plots,
// with the comparison against a baseline when cmp is not nil. It returns the
// paths written.
func Write(dir string, res result.Result, cfg Config, cmp *result.Comparison) ([]string, error) {
	path := filepath.Join(dir, result.FileName)
	if err := result.Write(path, res); err != nil {
		return nil, err
	}
	opts := report.Options{P99TargetMs: cfg.Targets(), OverheadP99TargetMs: cfg.OverheadP99TargetMs, Comparison: cmp,
		Floors: cfg.Floors(res)}
	files, err := report.WriteFiles(dir, res, opts)
	if err != nil {
		return nil, err
	}
	return append([]string{path}, files...), nil
}

// Select keeps the steps whose key ("name@rate", e.g. "apiserver/dgd@200")
// matches re; a nil re keeps every step. Comparing selections leaves out
// steps one has decided not to judge (say, the API-server rates above the
// saturation point of a shared machine) on both sides alike.
func Select(r result.Result, re *regexp.Regexp) result.Result {
	if re == nil {
		return r
	}
	out := r
	out.Steps = nil
	for _, s := range r.Steps {
		if re.MatchString(s.Key()) {
			out.Steps = append(out.Steps, s)
		}
	}
	return out
}

// Summarize prints what a person running `make bench` wants at the end: per
// ladder the highest rate under its p99 target, and the admission overhead
// per rate against its target. Best effort, like the progress lines: the result
// files are written by then, so a failed write to the terminal is not reported.
func Summarize(w io.Writer, res result.Result, cfg Config) {
	targets := cfg.Targets()
	_, _ = fmt.Fprintln(w, "Summary:")
	for _, l := range res.Ladders() {
		t, ok := targets[l.Name]
		if !ok {
			continue
		}
		verdict := "none (the lowest rate missed it)"
		if rate, ok := l.MaxRateUnder(t); ok {
			verdict = fmt.Sprintf("%g req/s", rate)
		}
		_, _ = fmt.Fprintf(w, "  %-22s highest rate with p99 ≤ %g ms: %s\n", l.Name, t, verdict)
		for _, s := range l.Steps {
			_, _ = fmt.Fprintf(w, "    @ %5g req/s  p50 %8.3f ms  p99 %9.3f ms  success %.2f%%\n", s.Rate, s.P50Ms, s.P99Ms, s.SuccessRatio*100)
		}
	}
	for _, o := range res.Overheads(result.APIServer) {
		mark := "✓"
		if o.P99Ms > cfg.OverheadP99TargetMs {
			mark = "✗"
		}
		_, _ = fmt.Fprintf(w, "  %s overhead @ %5g req/s  +p50 %8.3f ms  +p99 %9.3f ms  (target +p99 ≤ %g ms)\n", mark, o.Rate, o.P50Ms, o.P99Ms, cfg.OverheadP99TargetMs)
	}
}
