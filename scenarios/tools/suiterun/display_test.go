package suiterun

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// threeSuites: autocert running C5 with one failure so far, hostile ended green, multioperator waiting.
func threeSuites() Frame {
	return Frame{Start: t0, Now: t0.Add(4*time.Minute + 12*time.Second), Suites: []SuiteState{
		{Name: "autocert", Status: Running, Log: "/x/autocert/go-test.log", Started: t0, Activity: "C5 the CA rotates under load", Passed: 7, Failed: 1},
		{Name: "hostile", Status: Ended, Started: t0, Ended: t0.Add(time.Minute), Passed: 9, Summary: &report.Summary{}},
		{Name: "multioperator", Status: Waiting},
	}}
}

func TestPlainPrintsOneLinePerStartScenarioAndEnd(t *testing.T) {
	var b bytes.Buffer
	d := Plain{W: &b}
	f := threeSuites()
	d.Show(Event{Kind: SuiteStarted, Suite: 0}, f)
	d.Show(Event{Kind: Changed, Suite: 0}, f)
	d.Show(Event{Kind: ScenarioEnded, Suite: 0, Scenario: suite.ProgressEvent{Kind: suite.ScenarioEnded, ID: "C4", Result: report.Failed, Seconds: 30.1}}, f)
	d.Show(Event{Kind: SuiteEnded, Suite: 1}, f)
	f.Suites[2].Status = NotStarted
	d.Show(Event{Kind: SuiteEnded, Suite: 2}, f)
	d.Show(Event{Kind: RunEnded}, f)
	assert.Equal(t, `[  4m12s] ▶ autocert started (1 of 3 running); log: /x/autocert/go-test.log
[  4m12s]   autocert: C4 FAILED in 30.1s (7 passed, 1 failed so far)
[  4m12s] ✓ hostile passed in 1m0s: 9 passed, 0 failed
[  4m12s] - multioperator not started: the run was interrupted first
`, b.String())
	assert.NotContains(t, b.String(), "\x1b", "no terminal control in logs")
}

func TestSuiteEndLines(t *testing.T) {
	end := t0.Add(90 * time.Second)
	for want, s := range map[string]SuiteState{
		"✗ a failed in 1m30s: 7 passed, 1 failed":                                        {Name: "a", Failed: 1, Passed: 7, Summary: &report.Summary{}, Exit: errors.New("exit status 1")},
		"✗ a failed in 1m30s: go test ended (exit status 2) without a summary.json":      {Name: "a", Exit: errors.New("exit status 2")},
		"✗ a failed in 1m30s: 3 passed, 0 failed, but go test ended (signal: interrupt)": {Name: "a", Passed: 3, Summary: &report.Summary{}, Exit: errors.New("signal: interrupt")},
	} {
		s.Status, s.Started, s.Ended = Ended, t0, end
		assert.Equal(t, want, suiteEndLine(s, end))
	}
}

func TestLiveRedrawsOneLinePerRunningSuite(t *testing.T) {
	var b bytes.Buffer
	d := &Live{W: &b, Width: 80}
	f := threeSuites()
	d.Show(Event{Kind: Changed}, f)
	assert.Equal(t, "\x1b[J"+
		"e2e: 1 running, 1 waiting, 1 ended · 4m12s\n"+
		"  autocert        4m12s    7 passed  1 failed  C5 the CA rotates under load\n", b.String())

	b.Reset()
	d.Show(Event{Kind: SuiteEnded, Suite: 1}, f)
	assert.Equal(t, "\x1b[2F\x1b[J"+
		"[  4m12s] ✓ hostile passed in 1m0s: 9 passed, 0 failed\n"+
		"e2e: 1 running, 1 waiting, 1 ended · 4m12s\n"+
		"  autocert        4m12s    7 passed  1 failed  C5 the CA rotates under load\n", b.String(),
		"up over the last frame, the permanent line, the frame again")

	b.Reset()
	d.Show(Event{Kind: RunEnded}, f)
	assert.Equal(t, "\x1b[2F\x1b[J", b.String(), "the run's end erases the frame")
}

func TestLiveCutsLinesToTheTerminal(t *testing.T) {
	var b bytes.Buffer
	d := &Live{W: &b, Width: 40}
	d.Show(Event{Kind: Changed}, threeSuites())
	for _, line := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(b.String(), "\x1b[J"), "\n"), "\n") {
		assert.LessOrEqual(t, len([]rune(line)), 39, line)
	}
	assert.Contains(t, b.String(), "  autocert        4m12s    7 passed  1…\n")
}
