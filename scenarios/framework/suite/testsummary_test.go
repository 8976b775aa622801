package suite

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// make test pipes every suite's output through hack/test-summary.sh: a failed scenario's
// message must survive the filter, or CI's log says only "--- FAIL" (as it did for P4 on kind).
func TestMakeTestsSummaryKeepsWhatASuiteSaysOfItsFailures(t *testing.T) {
	root, err := workspace.Root()
	require.NoError(t, err)
	const why = "expected 0 failed admissions through 5 rollout restarts, saw 1 of 4666 failed: read: connection reset by peer"

	var out bytes.Buffer
	s := &Suite{spec: Spec{Name: "autocert"}, progress: newProgress(&out), recorder: report.NewRecorder("autocert", "kind", "v1.35.0")}
	for id, result := range map[string]report.Outcome{"C1": report.Passed, "P4": report.Failed} {
		require.NoError(t, s.recorder.Start(id, id+" a scenario"))
		details := map[string]any{"requests": 4666}
		if result == report.Failed {
			details[report.MessageKey] = why
		}
		require.NoError(t, s.recorder.Finish(id, result, details))
		s.progress.printf("%s", scenarioEndedLine(id, result, 1, details[report.MessageKey]))
	}
	out.WriteString("--- FAIL: TestAutoCert (572.87s)\n    --- FAIL: TestAutoCert/P4_a_scenario (123.37s)\n    load.go:147: a log line\nFAIL\n")
	s.printSummary()

	filter := exec.Command("bash", filepath.Join(root, "hack", "test-summary.sh")) //nolint:gosec // G204: the repository's own script, found from the workspace root
	filter.Stdin = &out
	filtered, err := filter.Output()
	require.NoError(t, err)
	got := string(filtered)
	assert.Contains(t, got, "✗ P4 failed (1.0s): "+why, "the scenario's end, as it happens")
	assert.Regexp(t, `FAILURES\n.*P4 \[autocert\] P4 a scenario\n.*`+why, got, "the suite's FAILURES section")
	assert.Contains(t, got, "suite autocert: 1 passed, 1 failed", "the suite's count")
	assert.Contains(t, got, "--- FAIL: TestAutoCert/P4_a_scenario", "go test's result lines")
	assert.NotContains(t, got, "✓ C1 passed", "a passed scenario's line is left out")
	assert.NotContains(t, got, "NOTES", "notes are left out")
	assert.NotContains(t, got, "a log line", "logs are left out")
}
