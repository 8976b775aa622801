package suite

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
)

// The lines a suite prints about its own steps and its scenarios are how a program running the
// suite follows it (`make e2e`'s gauntlet-e2e): a scenario's lines are written and read here
// only, so the two cannot drift apart, and a step's beginning is any line ending in " …" (the
// suite's steps.Printer writes "• <title> …"). Every line carries progress's elapsed-time prefix.
//
//	• Installing charts/dynamo-operator …         a step of the suite's own starts (so does
//	Creating local cluster "e2e-autocert-42" …     any line ending in " …": the provider's)
//	▶ C1 the operator creates its certificate      a scenario starts (its feature's name, ID first)
//	✓ C1 passed (12.3s)                            a scenario ends: passed,
//	✗ C1 failed (12.3s): expected …                failed, with its message,
//	- C1 skipped (0.0s): needs kind                or skipped, with the reason

// ProgressKind is what a progress line says.
type ProgressKind int

const (
	// StepStarted: a step of the suite's own (installing the release, deleting the cluster)
	// or of its provider's (creating the cluster) starts; Title names it.
	StepStarted ProgressKind = iota + 1
	// ScenarioStarted: scenario ID starts; Title is its feature's name.
	ScenarioStarted
	// ScenarioEnded: scenario ID ended with Result after Seconds; Message is the first line of
	// why it failed or was skipped.
	ScenarioEnded
)

// ProgressEvent is one progress line, parsed.
type ProgressEvent struct {
	Kind    ProgressKind
	ID      string
	Title   string
	Result  report.Outcome
	Seconds float64
	Message string
}

func scenarioStartedLine(name string) string { return "▶ " + name }

// scenarioEndedLine is the line of a scenario's end; message is printed as given (a skip
// without a reason prints <nil>, as it always has).
func scenarioEndedLine(id string, result report.Outcome, seconds float64, message any) string {
	switch result {
	case report.Passed:
		return fmt.Sprintf("✓ %s passed (%.1fs)", id, seconds)
	case report.Failed:
		return fmt.Sprintf("✗ %s failed (%.1fs): %v", id, seconds, message)
	default:
		return fmt.Sprintf("- %s skipped (%.1fs): %v", id, seconds, message)
	}
}

var (
	elapsedPrefix = regexp.MustCompile(`^\[ *[0-9]+\.[0-9]s\] `)
	scenarioEnd   = regexp.MustCompile(`^[✓✗-] ([A-Z][0-9]+) (passed|failed|skipped) \(([0-9]+\.[0-9])s\)(?:: (.*))?$`)
)

// ParseProgressLine reads one line of a suite's output; ok is false for every other line
// (go test's, the tests' logs, the suite's other messages).
func ParseProgressLine(line string) (ev ProgressEvent, ok bool) {
	loc := elapsedPrefix.FindStringIndex(line)
	if loc == nil {
		return ProgressEvent{}, false
	}
	line = strings.TrimRight(line[loc[1]:], "\r\n")
	if name, ok := strings.CutPrefix(line, "▶ "); ok {
		id := idPrefix.FindString(name)
		if id == "" {
			return ProgressEvent{}, false
		}
		return ProgressEvent{Kind: ScenarioStarted, ID: id, Title: name}, true
	}
	if m := scenarioEnd.FindStringSubmatch(line); m != nil {
		seconds, _ := strconv.ParseFloat(m[3], 64) // the pattern admits digits only
		return ProgressEvent{Kind: ScenarioEnded, ID: m[1], Result: report.Outcome(m[2]), Seconds: seconds, Message: m[4]}, true
	}
	if title, ok := strings.CutSuffix(line, " …"); ok && !strings.HasPrefix(line, "✓ ") && !strings.HasPrefix(line, "✗ ") {
		return ProgressEvent{Kind: StepStarted, Title: strings.TrimPrefix(title, "• ")}, true
	}
	return ProgressEvent{}, false
}
