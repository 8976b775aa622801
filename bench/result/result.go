// Package result is the benchmark's machine-readable output: one result.json
// per run (_output/bench/<run>/result.json) with the machine it ran on, the
// revision it measured and one Step per constant-rate attack, plus the
// comparison of a run against a baseline that `make bench-compare` turns into
// an exit status.
//
// Latencies are stored as float milliseconds and every such field says so in
// its name (p99Ms), because a bare number in a JSON file is otherwise
// ambiguous to anyone reading it without this package.
package result

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FileName is the name of a run's result file inside its run directory.
const FileName = "result.json"

// Mode says how a step reached the webhooks.
type Mode string

const (
	// Direct steps POST AdmissionReview requests straight to the operator's
	// webhook server over TLS keep-alive: the webhook's own latency.
	Direct Mode = "direct"
	// APIServer steps issue server-side dry-run creates through the API
	// server: what a user's kubectl sees, webhooks included.
	APIServer Mode = "apiserver"
)

// Result is one benchmark run: the content of result.json.
type Result struct {
	// Run names the run; it is also the directory under _output/bench.
	Run string `json:"run"`
	// StartedAt is when the first measured step began.
	StartedAt time.Time `json:"startedAt"`
	// Machine is where the numbers were measured; absolute latencies mean
	// nothing without it.
	Machine Machine `json:"machine"`
	// GitRevision is the measured commit, suffixed "-dirty" for uncommitted
	// changes (see GitRevision).
	GitRevision string `json:"gitRevision"`
	// Target is what was measured when it is not gauntlet's own operator: a target and the
	// version of its module, e.g. "gatekeeper github.com/open-policy-agent/gatekeeper/v3@v3.17.0"
	// (gauntlet-bench ab --target). GitRevision is then the bench's own revision.
	Target string `json:"target,omitempty"`
	// KubernetesVersion is the API server's version, e.g. "v1.37.0".
	KubernetesVersion string `json:"kubernetesVersion"`
	// Provider is the cluster provider the run used ("local", "kind").
	Provider string `json:"provider,omitempty"`
	// LoadAverage is the machine's 1-minute load average when the first step
	// started and when the last one ended: a shared machine's other work
	// competes with the benchmark for the CPUs, and tail latencies show it.
	LoadAverage *LoadAverage `json:"loadAverage,omitempty"`
	// Settings are the knobs the run was started with (warm-up, duration,
	// object mix, targets), so a rerun can reproduce it.
	Settings map[string]string `json:"settings,omitempty"`
	// Steps are the measured attacks in the order they ran; warm-up attacks
	// are not recorded.
	Steps []Step `json:"steps"`
}

// StepSpec is what a step was asked to do. Name and Rate identify a step:
// a rate ladder is all steps sharing a Name, and comparisons match steps by
// name and rate.
type StepSpec struct {
	// Name identifies the ladder, e.g. "direct/validate" or
	// "apiserver/dynamographdeployments".
	Name string `json:"name"`
	// Mode is direct or apiserver.
	Mode Mode `json:"mode"`
	// Target is the webhook path (direct) or the resource (apiserver) attacked.
	Target string `json:"target"`
	// Rate is the requested constant rate in requests per second.
	Rate float64 `json:"rate"`
	// Control names the ladder measuring the same requests without webhooks,
	// interleaved with this one at every rate: through the API server, the
	// dry-run in a namespace the webhooks skip (the report subtracts it to
	// isolate the admission overhead); direct, the same AdmissionReviews to a
	// path the webhook server does not serve. Compare judges a step relative
	// to its control, so that a machine busier than at the baseline does not
	// read as a regression. Empty for the control ladders themselves.
	Control string `json:"control,omitempty"`
}

// Key is "name@rate", the identity comparisons match on.
func (s StepSpec) Key() string {
	return s.Name + "@" + strconv.FormatFloat(s.Rate, 'f', -1, 64)
}

// Step is one measured constant-rate attack.
type Step struct {
	StepSpec
	// AchievedRate is the rate vegeta actually sent, in requests per second;
	// well below Rate means the load generator, not the target, was the limit.
	AchievedRate float64 `json:"achievedRate"`
	// DurationSeconds is the attack's length (first to last request sent).
	DurationSeconds float64 `json:"durationSeconds"`
	// Requests is the number of requests sent.
	Requests uint64 `json:"requests"`
	// SuccessRatio is the fraction of requests answered with HTTP 2xx/3xx,
	// between 0 and 1.
	SuccessRatio float64 `json:"successRatio"`
	// Throughput is successful requests per second.
	Throughput float64 `json:"throughput"`

	// Latency statistics in milliseconds. Min, mean and max are exact;
	// percentiles are vegeta's t-digest estimates.
	MinMs  float64 `json:"minMs"`
	MeanMs float64 `json:"meanMs"`
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P95Ms  float64 `json:"p95Ms"`
	P99Ms  float64 `json:"p99Ms"`
	MaxMs  float64 `json:"maxMs"`

	// StatusCodes counts responses per HTTP status. "0" is a request without a
	// usable answer: a transport error, or an answer the step's check rejected
	// (wrong status, malformed body, unexpected verdict); Errors says which.
	StatusCodes map[string]int `json:"statusCodes,omitempty"`
	// Errors holds up to MaxErrors distinct error messages.
	Errors []string `json:"errors,omitempty"`
	// Percentiles is the latency distribution curve, quantile ascending, the
	// last point being the maximum.
	Percentiles []Percentile `json:"percentiles,omitempty"`
	// Histogram holds bucket counts when the attack was run with buckets.
	Histogram []Bucket `json:"histogram,omitempty"`
	// Windows are the attack cut into equal time slices (see Window), each
	// with its own p50 and p99.
	Windows []Window `json:"windows,omitempty"`
	// ServerHistograms are what the servers themselves recorded during the
	// measured window (warm-up excluded): the API server's admission webhook
	// histogram and the operator's own, one entry per webhook.
	ServerHistograms []ServerHistogram `json:"serverHistograms,omitempty"`
	// Shared marks a step of an A/B run measured once for both sides (a
	// control, the floor): it appears in both sides' results, and CompareAB
	// does not judge it.
	Shared bool `json:"shared,omitempty"`
	// Reference marks a step of an A/B run whose sides ran in clusters of their own
	// (a target's two releases): a control or the floor, measured on each side in
	// its own cluster without the side's webhooks. Its B/A ratio is the difference
	// between the two clusters, which CompareAB reports and does not judge.
	Reference bool `json:"reference,omitempty"`
	// Segments, in an A/B run, is how many segments its measured attack ran
	// in, taking turns with the other ladders of its rate (load.RunTurns);
	// Windows splits evenly among them.
	Segments int `json:"segments,omitempty"`
}

// ServerHistogram summarises the observations a Prometheus histogram gained
// during one step: the difference of a scrape before and after the measured
// attack. Its quantiles are estimated as PromQL's histogram_quantile does
// (linear interpolation inside a bucket), so they are only as fine as the
// server's buckets.
type ServerHistogram struct {
	// Source is the process scraped: "apiserver" or "operator".
	Source string `json:"source"`
	// Metric is the histogram's name, e.g.
	// apiserver_admission_webhook_admission_duration_seconds.
	Metric string `json:"metric"`
	// Labels are the label values that select the series summed into this
	// histogram, e.g. {"name": "vdynamographdeployment.nvidia.com"}.
	Labels map[string]string `json:"labels,omitempty"`
	// Count is the number of observations in the window.
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"meanMs"`
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P99Ms  float64 `json:"p99Ms"`
}

// Percentile is one point of a latency distribution curve.
type Percentile struct {
	// Quantile is between 0 and 1 (0.99 is the 99th percentile).
	Quantile float64 `json:"quantile"`
	// Ms is the latency at that quantile in milliseconds.
	Ms float64 `json:"ms"`
}

// Bucket is one latency histogram bucket, [FromMs, ToMs).
type Bucket struct {
	FromMs float64 `json:"fromMs"`
	// ToMs is absent for the last, open-ended bucket.
	ToMs  *float64 `json:"toMs,omitempty"`
	Count uint64   `json:"count"`
}

// Validate checks what Compare and the report rely on: named steps with a
// known mode, a positive rate and unique name+rate keys.
func (r Result) Validate() error {
	seen := make(map[string]bool, len(r.Steps))
	for i, s := range r.Steps {
		if s.Name == "" {
			return fmt.Errorf("result %s: step #%d has no name", r.Run, i+1)
		}
		if s.Mode != Direct && s.Mode != APIServer {
			return fmt.Errorf("result %s: step %s has mode %q, want direct or apiserver", r.Run, s.Key(), s.Mode)
		}
		if s.Rate <= 0 {
			return fmt.Errorf("result %s: step %s has rate %v, want > 0", r.Run, s.Name, s.Rate)
		}
		if seen[s.Key()] {
			return fmt.Errorf("result %s: step %s appears twice", r.Run, s.Key())
		}
		seen[s.Key()] = true
	}
	return nil
}

// Ladder is every step of one name, by ascending rate.
type Ladder struct {
	Name    string
	Mode    Mode
	Target  string
	Control string
	Steps   []Step
}

// Ladders groups the steps by name, in the order each name first appears.
func (r Result) Ladders() []Ladder {
	var out []Ladder
	index := map[string]int{}
	for _, s := range r.Steps {
		i, ok := index[s.Name]
		if !ok {
			i = len(out)
			index[s.Name] = i
			out = append(out, Ladder{Name: s.Name, Mode: s.Mode, Target: s.Target, Control: s.Control})
		}
		out[i].Steps = append(out[i].Steps, s)
	}
	for i := range out {
		slices.SortStableFunc(out[i].Steps, func(a, b Step) int { return cmpFloat(a.Rate, b.Rate) })
	}
	return out
}

// MaxRateUnder returns the highest rate at which this and every lower rate
// kept p99 at or under p99TargetMs with every request successful; ok is false
// when even the lowest rate missed. Requiring every lower rate to pass keeps a
// lucky high step from hiding a failure below it.
func (l Ladder) MaxRateUnder(p99TargetMs float64) (rate float64, ok bool) {
	for _, s := range l.Steps {
		if s.P99Ms > p99TargetMs || s.SuccessRatio < 1 || s.Requests == 0 {
			break
		}
		rate, ok = s.Rate, true
	}
	return rate, ok
}

// Overhead is the latency a ladder adds over its control ladder at one rate:
// the admission webhooks' cost as seen through the API server.
type Overhead struct {
	Name    string  `json:"name"`
	Control string  `json:"control"`
	Rate    float64 `json:"rate"`
	P50Ms   float64 `json:"p50Ms"`
	P90Ms   float64 `json:"p90Ms"`
	P99Ms   float64 `json:"p99Ms"`
}

// Overheads subtracts each control ladder's percentiles from those of the
// ladder of the given mode naming it, for every rate both measured.
// Differences of percentiles are not percentiles of differences, but with
// independent samples at the same rate they are the standard, reproducible
// estimate of added latency.
func (r Result) Overheads(mode Mode) []Overhead {
	var out []Overhead
	for _, s := range r.Steps {
		if s.Mode != mode {
			continue
		}
		c, ok := r.ControlOf(s)
		if !ok {
			continue
		}
		out = append(out, overheadOver(s, c))
	}
	return out
}

// overheadOver is what s adds over c, percentile by percentile.
func overheadOver(s, c Step) Overhead {
	return Overhead{
		Name: s.Name, Control: c.Name, Rate: s.Rate,
		P50Ms: s.P50Ms - c.P50Ms, P90Ms: s.P90Ms - c.P90Ms, P99Ms: s.P99Ms - c.P99Ms,
	}
}

// ControlOf returns the step of s's control ladder at s's rate.
func (r Result) ControlOf(s Step) (Step, bool) {
	if s.Control == "" {
		return Step{}, false
	}
	return r.step(s.Control, s.Rate)
}

// step is the step of ladder name at rate.
func (r Result) step(name string, rate float64) (Step, bool) {
	key := StepSpec{Name: name, Rate: rate}.Key()
	for _, s := range r.Steps {
		if s.Key() == key {
			return s, true
		}
	}
	return Step{}, false
}

// Encode writes r as indented JSON.
func Encode(w io.Writer, r Result) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Steps == nil {
		r.Steps = []Step{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encoding result %s: %w", r.Run, err)
	}
	return nil
}

// Decode reads and validates a result.
func Decode(rd io.Reader) (Result, error) {
	var r Result
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return Result{}, fmt.Errorf("decoding result: %w", err)
	}
	if err := r.Validate(); err != nil {
		return Result{}, err
	}
	return r, nil
}

// Write writes r to path, creating its directory; the file appears complete
// or not at all.
func Write(path string, r Result) error {
	var b bytes.Buffer
	if err := Encode(&b, r); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(fmt.Errorf("writing %s: %w", path, err), os.Remove(tmp))
	}
	return nil
}

// Read reads and validates a result file.
func Read(path string) (Result, error) {
	f, err := os.Open(path) //nolint:gosec // G304: reading the result file the caller names is the point
	if err != nil {
		return Result{}, fmt.Errorf("reading benchmark result: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	r, err := Decode(f)
	if err != nil {
		return Result{}, fmt.Errorf("reading benchmark result %s: %w", path, err)
	}
	return r, nil
}

// ReadAll reads every result.json in dirs and one level below (a directory of runs, as
// _output/bench holds them), ordered by when each run started. Finding none is an error.
func ReadAll(dirs ...string) ([]Result, error) {
	var paths []string
	for _, d := range dirs {
		for _, pattern := range []string{filepath.Join(d, FileName), filepath.Join(d, "*", FileName)} {
			found, err := filepath.Glob(pattern)
			if err != nil {
				return nil, err
			}
			paths = append(paths, found...)
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no %s in %s or their sub-directories", FileName, strings.Join(dirs, ", "))
	}
	var out []Result
	for _, p := range paths {
		r, err := Read(p)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b Result) int { return a.StartedAt.Compare(b.StartedAt) })
	return out, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
