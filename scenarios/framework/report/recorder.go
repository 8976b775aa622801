package report

import (
	"fmt"
	"maps"
	"sync"
	"time"
)

// Recorder collects a suite's scenario outcomes as they happen. Suites call
// Start from a before-feature hook and Finish from the after-feature hook;
// scenarios may add measurements with Note while they run. All methods are
// safe for concurrent use because e2e-framework can run features in parallel.
type Recorder struct {
	now func() time.Time

	mu        sync.Mutex
	meta      Summary
	running   map[string]*runningScenario
	finished  map[string]Scenario
	startedAt time.Time
}

type runningScenario struct {
	title   string
	started time.Time
	details map[string]any
}

// NewRecorder starts recording a suite; the suite's wall time is measured from
// this call.
func NewRecorder(suite, provider, kubernetesVersion string) *Recorder {
	return newRecorder(suite, provider, kubernetesVersion, time.Now)
}

func newRecorder(suite, provider, kubernetesVersion string, now func() time.Time) *Recorder {
	return &Recorder{
		now:       now,
		meta:      Summary{Suite: suite, Provider: provider, KubernetesVersion: kubernetesVersion},
		running:   map[string]*runningScenario{},
		finished:  map[string]Scenario{},
		startedAt: now(),
	}
}

// SetKubernetesVersion records the cluster's version once it is known; suites
// often learn it only after the provider has created the cluster.
func (r *Recorder) SetKubernetesVersion(v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.meta.KubernetesVersion = v
}

// SetStress records how many CPU-bound workers run beside the suite (0: none).
func (r *Recorder) SetStress(workers int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.meta.Stress = workers
}

// Start marks scenario id as running. Starting an ID twice is an error: the
// summary holds one outcome per ID, and a second run would silently replace
// the first.
func (r *Recorder) Start(id, title string) error {
	if id == "" {
		return fmt.Errorf("starting scenario %q: empty id", title)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.running[id]; ok {
		return fmt.Errorf("starting scenario %s: already running", id)
	}
	if _, ok := r.finished[id]; ok {
		return fmt.Errorf("starting scenario %s: already finished", id)
	}
	r.running[id] = &runningScenario{title: title, started: r.now(), details: map[string]any{}}
	return nil
}

// Note adds one detail (a measurement, a count) to a running scenario; a later
// Note or Finish with the same key replaces it. The value must be
// JSON-encodable.
func (r *Recorder) Note(id, key string, value any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs, ok := r.running[id]
	if !ok {
		return fmt.Errorf("noting %s on scenario %s: scenario is not running", key, id)
	}
	rs.details[key] = value
	return nil
}

// Finish records the outcome of a running scenario, merging details into
// those noted so far. For a failed or skipped scenario put the reason under
// MessageKey.
func (r *Recorder) Finish(id string, result Outcome, details map[string]any) error {
	if !result.Valid() {
		return fmt.Errorf("finishing scenario %s: result %q is not passed, failed or skipped", id, result)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rs, ok := r.running[id]
	if !ok {
		if _, done := r.finished[id]; done {
			return fmt.Errorf("finishing scenario %s: already finished", id)
		}
		return fmt.Errorf("finishing scenario %s: it was never started", id)
	}
	delete(r.running, id)
	d := maps.Clone(rs.details)
	maps.Copy(d, details)
	r.finished[id] = Scenario{
		ID:      id,
		Title:   rs.title,
		Result:  result,
		Seconds: r.now().Sub(rs.started).Seconds(),
		Details: d,
	}
	return nil
}

// Summary returns a snapshot of the suite so far. Scenarios still running are
// reported as failed with an explanatory message: when a suite writes its
// summary, a scenario that never finished was cut short by a panic or a
// timeout, and calling that anything but a failure would hide it.
func (r *Recorder) Summary() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	s := r.meta
	s.StartedAt = r.startedAt
	s.Seconds = now.Sub(r.startedAt).Seconds()
	s.Scenarios = make([]Scenario, 0, len(r.finished)+len(r.running))
	for _, sc := range r.finished {
		sc.Details = maps.Clone(sc.Details)
		s.Scenarios = append(s.Scenarios, sc)
	}
	for id, rs := range r.running {
		d := maps.Clone(rs.details)
		d[MessageKey] = "scenario started but never finished (the suite stopped before it completed)"
		s.Scenarios = append(s.Scenarios, Scenario{
			ID:      id,
			Title:   rs.title,
			Result:  Failed,
			Seconds: now.Sub(rs.started).Seconds(),
			Details: d,
		})
	}
	return s.normalized()
}

// WriteFiles writes the current Summary to dir/summary.json and dir/junit.xml.
func (r *Recorder) WriteFiles(dir string) error {
	return WriteFiles(dir, r.Summary())
}
