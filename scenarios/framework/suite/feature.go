package suite

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
)

// recordedFeature is a scenario feature with the suite's bookkeeping around it: its first
// setup step records the start, its first teardown step collects artifacts when something
// failed (before the scenario's own teardown removes the evidence), and a cleanup of the
// feature's test records the outcome — even when a setup step stopped the test.
type recordedFeature struct {
	inner types.Feature
	suite *Suite
	// atOnce says it runs at once with other features (LabelAtOnce): its phase of the profile
	// overlaps theirs instead of nesting in the one begun first.
	atOnce bool

	stepsOnce sync.Once
	steps     []types.Step

	mu          sync.Mutex
	t           *testing.T
	started     time.Time
	failedSteps []string
	skipped     int
	assessments int
	collected   bool
	// endPhase ends the scenario's phase of the suite's profile.
	endPhase func()
}

func (f *recordedFeature) id() string { return scenarioID(f.inner) }

// Name starts with the scenario ID, so `-run 'TestX/C1'` selects one scenario.
func (f *recordedFeature) Name() string {
	name := f.inner.Name()
	if idPrefix.FindString(name) == f.id() {
		return name
	}
	return f.id() + " " + name
}

func (f *recordedFeature) Labels() types.Labels { return f.inner.Labels() }

// Steps is called once per level by e2e-framework; the wrapping is built once.
func (f *recordedFeature) Steps() []types.Step {
	f.stepsOnce.Do(func() { f.steps = f.buildSteps() })
	return f.steps
}

func (f *recordedFeature) buildSteps() []types.Step {
	steps := []types.Step{step{name: "record start", level: types.LevelSetup, fn: f.start}}
	var teardowns []types.Step
	for _, st := range f.inner.Steps() {
		switch st.Level() {
		case types.LevelAssess:
			f.assessments++
			steps = append(steps, step{name: st.Name(), level: st.Level(), fn: f.watch(st)})
		case types.LevelTeardown:
			teardowns = append(teardowns, st)
		default:
			steps = append(steps, st)
		}
	}
	steps = append(steps, step{name: "nothing lost", level: types.LevelAssess,
		fn: f.watch(step{name: "nothing lost: every object the scenario wrote is there with its last written spec", level: types.LevelAssess, fn: f.nothingLost})})
	steps = append(steps, step{name: "collect artifacts of a failure", level: types.LevelTeardown, fn: f.collectIfFailed})
	return append(steps, teardowns...)
}

func (f *recordedFeature) start(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	s := f.suite
	if err := s.recorder.Start(f.id(), f.inner.Name()); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	begin := s.progress.begin
	if f.atOnce {
		begin = s.progress.beginAtOnce
	}
	f.t, f.started, f.endPhase = t, time.Now(), begin(f.Name())
	f.mu.Unlock()
	s.cluster.ledger.begin(f.id())
	running.Store(t.Name(), f.id())
	s.progress.printf("%s", scenarioStartedLine(f.Name()))
	t.Cleanup(f.finish)
	return ctx
}

// watch runs an assessment and remembers whether it failed or was skipped.
func (f *recordedFeature) watch(st types.Step) types.StepFunc {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) (out context.Context) {
		out = ctx
		defer func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			switch {
			case t.Failed():
				f.failedSteps = append(f.failedSteps, st.Name())
			case t.Skipped():
				f.skipped++
			}
		}()
		return st.Func()(ctx, t, cfg)
	}
}

// nothingLost checks the ledger after the scenario's assessments: every Dynamo object it created
// and did not delete is still there, the same object, with the spec it last wrote. It is not
// judged when an assessment already failed: the scenario stopped half-way.
func (f *recordedFeature) nothingLost(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	f.mu.Lock()
	failed := len(f.failedSteps) > 0
	f.mu.Unlock()
	if failed {
		t.Log("not checked: an assessment failed")
		return ctx
	}
	lost, checked, err := f.suite.cluster.ledger.lost(ctx, f.suite.cluster.Dynamic(), f.id())
	expect.NoError(t, err, "checking the objects %s wrote", f.id())
	for _, l := range lost {
		expect.Errorf(t, "expected every object the scenario wrote to be there with its last written spec; %s", l)
	}
	if len(lost) == 0 && checked > 0 {
		t.Logf("%d object(s) written by %s are there with their last written spec", checked, f.id())
	}
	return ctx
}

func (f *recordedFeature) collectIfFailed(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	if t.Failed() {
		f.collect()
	}
	return ctx
}

func (f *recordedFeature) collect() {
	f.mu.Lock()
	if f.collected {
		f.mu.Unlock()
		return
	}
	f.collected = true
	f.mu.Unlock()
	s := f.suite
	dir := s.artifactsDir(f.id())
	ctx, cancel := context.WithTimeout(context.Background(), artifactsTimeout)
	defer cancel()
	if err := collectArtifacts(ctx, s.cluster, dir); err != nil {
		s.progress.printf("  collecting artifacts of %s: %v", f.id(), err)
	}
}

// finish records the outcome; it runs as the feature test's cleanup.
func (f *recordedFeature) finish() {
	s := f.suite
	f.mu.Lock()
	t, started, failedSteps := f.t, f.started, f.failedSteps
	allSkipped := f.assessments > 0 && f.skipped == f.assessments
	f.endPhase()
	f.mu.Unlock()
	running.Delete(t.Name())
	s.cluster.ledger.end(f.id())

	result := report.Passed
	switch {
	case t.Failed():
		result = report.Failed
	case t.Skipped() || allSkipped:
		result = report.Skipped
	}
	details := map[string]any{}
	msgs := expect.Messages(t.Name())
	switch {
	case result == report.Failed && len(msgs) == 0 && len(failedSteps) > 0:
		msgs = []string{fmt.Sprintf("step %q failed (it recorded no message through package expect; see the test log)", strings.Join(failedSteps, `", "`))}
	case result == report.Failed && len(msgs) == 0:
		msgs = []string{"a setup or teardown step failed (no message recorded through package expect; see the test log)"}
	}
	if result != report.Passed && len(msgs) > 0 {
		details[report.MessageKey] = strings.Join(msgs, "; ")
	}
	if len(failedSteps) > 0 {
		details["failedSteps"] = failedSteps
	}
	if err := s.recorder.Finish(f.id(), result, details); err != nil {
		t.Error(err)
	}

	elapsed := time.Since(started).Seconds()
	if result == report.Failed {
		f.collect()
	}
	s.progress.printf("%s", scenarioEndedLine(f.id(), result, elapsed, details[report.MessageKey]))
	if result == report.Failed {
		s.progress.printf("  artifacts: %s", s.artifactsDir(f.id()))
	}
}

// step is a types.Step made by the suite.
type step struct {
	name  string
	level types.Level
	fn    types.StepFunc
}

func (s step) Name() string         { return s.name }
func (s step) Level() types.Level   { return s.level }
func (s step) Func() types.StepFunc { return s.fn }
