package suite

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
)

// printed is what progress wrote for one line, prefix included.
func printed(t *testing.T, line string) string {
	t.Helper()
	var b bytes.Buffer
	newProgress(&b).printf("%s", line)
	return strings.TrimSuffix(b.String(), "\n")
}

// stepBegun is the line progress.step writes when a step begins, prefix included.
func stepBegun(t *testing.T, title string) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, newProgress(&b).step(title, func() error { return nil }))
	first, _, _ := strings.Cut(b.String(), "\n")
	return first
}

func TestProgressLinesParseAsPrinted(t *testing.T) {
	for _, tc := range []struct {
		line string
		want ProgressEvent
	}{
		{`Creating local cluster "e2e-autocert-4242" …`, ProgressEvent{Kind: StepStarted, Title: `Creating local cluster "e2e-autocert-4242"`}},
		{scenarioStartedLine("C12 the operator restarts (twice)"), ProgressEvent{Kind: ScenarioStarted, ID: "C12", Title: "C12 the operator restarts (twice)"}},
		{scenarioEndedLine("C12", report.Passed, 12.34, nil), ProgressEvent{Kind: ScenarioEnded, ID: "C12", Result: report.Passed, Seconds: 12.3}},
		{scenarioEndedLine("A3", report.Failed, 1, "expected denial: got allowed"), ProgressEvent{Kind: ScenarioEnded, ID: "A3", Result: report.Failed, Seconds: 1, Message: "expected denial: got allowed"}},
		{scenarioStartedLine("P5 failover, waiting …"), ProgressEvent{Kind: ScenarioStarted, ID: "P5", Title: "P5 failover, waiting …"}},
		{scenarioEndedLine("T2", report.Failed, 3, "still waiting …"), ProgressEvent{Kind: ScenarioEnded, ID: "T2", Result: report.Failed, Seconds: 3, Message: "still waiting …"}},
		{scenarioEndedLine("M4", report.Skipped, 0, "needs a provider that freezes containers"), ProgressEvent{Kind: ScenarioEnded, ID: "M4", Result: report.Skipped, Message: "needs a provider that freezes containers"}},
	} {
		got, ok := ParseProgressLine(printed(t, tc.line))
		require.True(t, ok, tc.line)
		assert.Equal(t, tc.want, got, tc.line)
	}
	got, ok := ParseProgressLine(stepBegun(t, "Creating cluster e2e-autocert-4242"))
	require.True(t, ok)
	assert.Equal(t, ProgressEvent{Kind: StepStarted, Title: "Creating cluster e2e-autocert-4242"}, got)
}

func TestProgressLinesIgnoreEverythingElse(t *testing.T) {
	for _, line := range []string{
		"=== RUN   TestAutoCert/C1_the_operator_creates_its_certificate",
		"--- FAIL: TestAutoCert/C1_the_operator_creates_its_certificate (3.00s)",
		"• no elapsed-time prefix …",
		printed(t, "✓ Installing charts/dynamo-operator (automatic mode) (3.2s)"),
		printed(t, "✗ S1 no private key material in collected logs and artifacts: found one"),
		printed(t, "▶ no scenario ID"),
		printed(t, "  artifacts: /tmp/x"),
		printed(t, "✗ Deleting cluster x (0.2s): still running …"),
	} {
		_, ok := ParseProgressLine(line)
		assert.False(t, ok, line)
	}
}
