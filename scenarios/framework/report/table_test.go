package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report/reporttest"
)

// twoSuites is autocert (everything passes, C8 reports a count) and
// certmanager (A2 fails), sharing the A rows as the real suites do.
func twoSuites() []Summary {
	auto := Summary{Suite: "autocert", Provider: "local", KubernetesVersion: "v1.37.0", Seconds: 95.4, Scenarios: []Scenario{
		{ID: "A10", Title: "Defaulting fills the image", Result: Passed, Seconds: 1.2},
		{ID: "A2", Title: "Invalid DGD is denied", Result: Passed, Seconds: 0.8},
		{ID: "A1", Title: "Valid DGD is admitted", Result: Passed, Seconds: 0.5},
		{ID: "C8", Title: "Renewal under constant load", Result: Passed, Seconds: 42, Details: map[string]any{
			"admissions": float64(4200), "failures": float64(0),
		}},
	}}
	cm := Summary{Suite: "certmanager", Provider: "local", KubernetesVersion: "v1.37.0", Seconds: 130.6, Scenarios: []Scenario{
		{ID: "A1", Title: "Valid DGD is admitted", Result: Passed, Seconds: 0.6},
		{ID: "A2", Title: "Invalid DGD is denied", Result: Failed, Seconds: 30.1, Details: map[string]any{
			MessageKey:     "expected the API server to deny the DGD with \"spec.services is required\", but it was admitted",
			"webhookCalls": float64(0),
		}},
		{ID: "A10", Title: "Defaulting fills the image", Result: Skipped, Details: map[string]any{MessageKey: "filtered by labels"}},
	}}
	// Passed in reverse to prove the renderer orders suites itself.
	return []Summary{cm, auto}
}

func TestRenderMarkdown(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, RenderMarkdown(&b, twoSuites()))
	md := b.String()
	lines := strings.Split(md, "\n")

	assert.Contains(t, lines, "**7 scenarios: 5 passed, 1 failed, 1 skipped — 2 suites, 3m46s**")
	assert.Contains(t, lines, "| autocert | local | v1.37.0 | 4 | 0 | 0 | 1m35s |")
	assert.Contains(t, lines, "| certmanager | local | v1.37.0 | 1 | 1 | 1 | 2m11s |")
	assert.Contains(t, lines, "| **Total** | | | **5** | **1** | **1** | **3m46s** |")
	assert.Contains(t, lines, "| ID | Title | autocert | certmanager |")
	assert.Contains(t, lines, "| A1 | Valid DGD is admitted | ✅ passed 0.5s | ✅ passed 0.6s |")
	assert.Contains(t, lines, "| A2 | Invalid DGD is denied | ✅ passed 0.8s | ❌ **failed** 30.1s |")
	assert.Contains(t, lines, "| A10 | Defaulting fills the image | ✅ passed 1.2s | ⏭️ skipped |")
	assert.Contains(t, lines, "| C8 | Renewal under constant load | ✅ passed 42.0s | — |")

	reporttest.InOrder(t, md, "| A1 |", "| A2 |", "| A10 |", "| C8 |")
}

func TestRenderMarkdownShowsFailureDetails(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, RenderMarkdown(&b, twoSuites()))
	md := b.String()

	failures := reporttest.Section(t, md, "## Failures", "## Notes")
	assert.Contains(t, failures, "### A2 · certmanager — Invalid DGD is denied")
	assert.Contains(t, failures, "```text\nexpected the API server to deny the DGD with \"spec.services is required\", but it was admitted\n```")
	assert.Contains(t, failures, "- `webhookCalls`: `0`")
	assert.NotContains(t, failures, "C8", "passed scenarios are not failures")

	measurements := md[strings.Index(md, "## Notes"):]
	assert.Contains(t, measurements, "### C8 · autocert — Renewal under constant load")
	assert.Contains(t, measurements, "- `admissions`: `4200`")
	assert.Contains(t, measurements, "### A10 · certmanager", "a skip reason is listed with the measurements")
}

func TestRenderMarkdownKeepsCellsAndFencesIntact(t *testing.T) {
	s := Summary{Suite: "x", Scenarios: []Scenario{{ID: "A1", Title: "pipes | and\nnewlines", Result: Failed, Details: map[string]any{
		MessageKey: "log:\n```\nboom\n```",
		"log":      "line1\nline2",
	}}}}
	var b bytes.Buffer
	require.NoError(t, RenderMarkdown(&b, []Summary{s}))
	md := b.String()
	assert.Contains(t, md, `| A1 | pipes \| and newlines | ❌ **failed** 0.0s |`)
	assert.Contains(t, md, "````text\nlog:\n```\nboom\n```\n````", "the fence is longer than any backtick run in the message")
	assert.Contains(t, md, "- `log`:\n\n```text\nline1\nline2\n```")
}

func TestRenderText(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, RenderText(&b, twoSuites()))
	out := b.String()
	lines := strings.Split(out, "\n")

	assert.Equal(t, "E2E RESULTS  7 scenarios: 5 passed, 1 failed, 1 skipped — 2 suites, 3m46s", lines[0])
	suiteHeader := reporttest.LineStartingWith(t, lines, "SUITE ")
	total := reporttest.LineStartingWith(t, lines, "TOTAL ")
	assert.Equal(t, []string{"TOTAL", "5", "1", "1", "3m46s"}, strings.Fields(total))
	assert.Equal(t, strings.Index(suiteHeader, "PASSED"), strings.Index(total, "5"))
	header := reporttest.LineStartingWith(t, lines, "ID ")
	a2 := reporttest.LineStartingWith(t, lines, "A2 ")
	// Columns line up: each suite's cell starts where its header starts.
	assert.Equal(t, strings.Index(header, "CERTMANAGER"), strings.Index(a2, "FAILED 30.1s"))
	assert.Equal(t, strings.Index(header, "AUTOCERT"), strings.Index(a2, "passed 0.8s"))
	assert.Contains(t, reporttest.LineStartingWith(t, lines, "C8 "), "passed 42.0s  -")
	reporttest.InOrder(t, out, "\nA1 ", "\nA2 ", "\nA10 ", "\nC8 ")

	failures := reporttest.Section(t, out, "\nFAILURES\n", "\nNOTES\n")
	assert.Contains(t, failures, "  A2 [certmanager] Invalid DGD is denied\n"+
		"      expected the API server to deny the DGD with \"spec.services is required\", but it was admitted\n"+
		"      webhookCalls: 0\n")
	assert.Contains(t, out[strings.Index(out, "\nNOTES\n"):], "      admissions: 4200\n      failures: 0\n")
}

func TestRenderTextWithoutSuites(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, RenderText(&b, nil))
	assert.Contains(t, b.String(), "0 scenarios: 0 passed, 0 failed, 0 skipped — 0 suites, 0.0s")
}

func TestWriteMarkdownFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e2e", MarkdownFile)
	require.NoError(t, WriteMarkdownFile(path, twoSuites()))
	data, err := os.ReadFile(path) //nolint:gosec // G304: the file WriteMarkdownFile wrote under t.TempDir()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(data), "# End-to-end results\n"))
}

func TestOneSuiteOnTwoProvidersGetsAColumnEach(t *testing.T) {
	local := Summary{Suite: "autocert", Provider: "local", KubernetesVersion: "v1.37.0", Seconds: 60, Scenarios: []Scenario{
		{ID: "C6", Title: "No startup race", Result: Passed, Seconds: 9},
	}}
	kind := local
	kind.Provider, kind.Seconds = "kind", 132
	kind.Scenarios = []Scenario{{ID: "C6", Title: "No startup race", Result: Failed, Seconds: 27, Details: map[string]any{MessageKey: "connection refused"}}}

	var b bytes.Buffer
	require.NoError(t, RenderText(&b, []Summary{kind, local}))
	text := b.String()
	assert.Contains(t, text, "AUTOCERT/KIND")
	assert.Contains(t, text, "AUTOCERT/LOCAL")
	assert.Regexp(t, `autocert\s+kind\s+v1.37.0\s+0\s+1\s+0\s+2m12s`, text, "each run has its own totals row with its time")

	b.Reset()
	require.NoError(t, RenderMarkdown(&b, []Summary{kind, local}))
	assert.Contains(t, b.String(), "| autocert/kind |", "the failure names the provider it happened on")

	b.Reset()
	require.NoError(t, RenderText(&b, []Summary{local}))
	assert.NotContains(t, b.String(), "AUTOCERT/LOCAL", "one provider: columns keep the suite's name")
}

func TestFirstLine(t *testing.T) {
	assert.Equal(t, "first", FirstLine("\n  first\nsecond", 10), "the first non-blank line")
	assert.Equal(t, "abcdefg…", FirstLine("abcdefghijk", 10), "cut to 10 bytes with the ellipsis")
	assert.Equal(t, "ab…", FirstLine("abééé", 6), "never inside a character: é is two bytes")
	assert.Equal(t, "exact", FirstLine("exact", 5))
}

func TestMarkdownCell(t *testing.T) {
	assert.Equal(t, `a \| b c`, MarkdownCell("a | b\n  c"), "one line, pipes escaped")
}

// A run beside --stress workers says so in summary.json, junit.xml and both tables; a run
// without them says nothing, and summary.json keeps the contract's keys.
func TestStressIsStated(t *testing.T) {
	suites := twoSuites()
	suites[1].Stress = 2 // autocert
	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, suites[1]))
	assert.Contains(t, js.String(), `"stress": 2,`)
	back, err := DecodeJSON(&js)
	require.NoError(t, err)
	assert.Equal(t, 2, back.Stress)
	js.Reset()
	require.NoError(t, WriteJSON(&js, suites[0]))
	assert.NotContains(t, js.String(), "stress", "a run without workers: no stress key")

	var x bytes.Buffer
	require.NoError(t, WriteJUnit(&x, suites[1]))
	assert.Contains(t, x.String(), `<property name="stress" value="stress: 2 CPU-bound workers"></property>`)

	var text, md bytes.Buffer
	require.NoError(t, RenderText(&text, suites))
	assert.Contains(t, strings.Split(text.String(), "\n"), "stress: 2 CPU-bound workers beside autocert")
	require.NoError(t, RenderMarkdown(&md, suites))
	assert.Contains(t, strings.Split(md.String(), "\n"), "stress: 2 CPU-bound workers beside autocert")

	text.Reset()
	require.NoError(t, RenderText(&text, twoSuites()))
	assert.NotContains(t, text.String(), "stress")
	assert.Equal(t, "stress: 1 CPU-bound worker", StressLine(1))
}
