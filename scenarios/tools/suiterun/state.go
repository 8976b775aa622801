package suiterun

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// Status is where a suite is in the run.
type Status int

const (
	// Waiting: its turn has not come (all E2E_JOBS slots are busy).
	Waiting Status = iota
	// Running: its go test is running.
	Running
	// Ended: its go test exited.
	Ended
	// NotStarted: the run was interrupted before its turn.
	NotStarted
)

// buildingActivity is what a suite does before it prints anything: go test compiles it.
const buildingActivity = "go test: building"

// SuiteState is what the run knows of one suite, followed through its output as it arrives.
type SuiteState struct {
	Name   string
	Status Status
	// Dir is the directory it reports into (Options.Dir); Log, its full output, is in it.
	Dir, Log       string
	Started, Ended time.Time
	// Activity is what it is doing now: the running scenario ("C5 the CA rotates …"; the last
	// started, "… (and 2 more at once)", when it runs several at once) or a step of its own
	// ("Creating cluster e2e-autocert-4242"); "" between two scenarios.
	Activity string
	// running are the titles of the scenarios running now, in the order they started.
	running []string
	// Passed, Failed and Skipped count the scenarios ended so far; once it ended, those of its
	// summary.json (which adds the suite-wide check S1).
	Passed, Failed, Skipped int
	// Exit is go test's error (nil for exit status 0).
	Exit error
	// Summary is its summary.json, when it wrote one.
	Summary *report.Summary

	// What Explanation picks from: the first panic, the last ✗ line, the last line.
	panicLine, failureLine, lastLine string
}

// observe follows the suite through one line of its output and returns what the line said,
// if it was one of the suite's progress lines.
func (s *SuiteState) observe(line string) (suite.ProgressEvent, bool) {
	s.noteExplanation(line)
	ev, ok := suite.ParseProgressLine(line)
	if !ok {
		return ev, false
	}
	switch ev.Kind {
	case suite.StepStarted:
		s.Activity = ev.Title
	case suite.ScenarioStarted:
		s.running = append(s.running, ev.Title)
		s.Activity = s.scenariosRunning()
	case suite.ScenarioEnded:
		s.running = slices.DeleteFunc(s.running, func(title string) bool { return title == ev.ID || strings.HasPrefix(title, ev.ID+" ") })
		s.Activity = s.scenariosRunning()
		switch ev.Result {
		case report.Passed:
			s.Passed++
		case report.Failed:
			s.Failed++
		case report.Skipped:
			s.Skipped++
		}
	}
	return ev, true
}

// scenariosRunning is the Activity of the scenarios running now: the last started, and how many
// more run with it.
func (s *SuiteState) scenariosRunning() string {
	switch len(s.running) {
	case 0:
		return ""
	case 1:
		return s.running[0]
	}
	return fmt.Sprintf("%s (and %d more at once)", s.running[len(s.running)-1], len(s.running)-1)
}

func (s *SuiteState) noteExplanation(line string) {
	line = strings.TrimSpace(line)
	switch {
	case line == "" || line == "FAIL" || line == "PASS" || strings.HasPrefix(line, "FAIL\t") ||
		strings.HasPrefix(line, "ok  \t") || strings.HasPrefix(line, "exit status "):
		return // go test's own verdict says nothing of why
	case strings.HasPrefix(line, "panic: ") && s.panicLine == "":
		s.panicLine = line
	case strings.Contains(line, "✗ "):
		s.failureLine = line
	}
	s.lastLine = line
}

// Explanation is the line of the suite's output that best says why it ended badly when its
// summary cannot: the first panic (go test's timeout is one), else the last line marked ✗,
// else its last line (a compiler error, say).
func (s SuiteState) Explanation() string {
	for _, l := range []string{s.panicLine, s.failureLine} {
		if l != "" {
			return l
		}
	}
	return s.lastLine
}

// end records how the suite ended: go test's exit and, when it wrote one, its summary, whose
// counts replace those followed from its output.
func (s *SuiteState) end(at time.Time, exit error, sum *report.Summary) {
	s.Status, s.Ended, s.Exit, s.Summary, s.Activity = Ended, at, exit, sum, ""
	if sum != nil {
		c := sum.Counts()
		s.Passed, s.Failed, s.Skipped = c.Passed, c.Failed, c.Skipped
	}
}

// OK reports whether the suite ended well: go test exited 0 and its summary has no failure.
func (s SuiteState) OK() bool {
	return s.Status == Ended && s.Exit == nil && s.Summary != nil && s.Failed == 0
}

// Elapsed is how long it has run, at now (or ran, once it ended).
func (s SuiteState) Elapsed(now time.Time) time.Duration {
	switch s.Status {
	case Running:
		return now.Sub(s.Started)
	case Ended:
		return s.Ended.Sub(s.Started)
	default:
		return 0
	}
}
