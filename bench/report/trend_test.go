package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/bench/result"
)

// nightlyRuns are three runs of syntheticResult a day apart, the last one without the
// apiserver/configmaps ladder's 400 req/s step and with direct/validate twice as slow.
func nightlyRuns() []result.Result {
	var runs []result.Result
	for day := range 3 {
		r := syntheticResult()
		r.StartedAt = r.StartedAt.Add(time.Duration(day) * 24 * time.Hour)
		r.GitRevision = strings.Repeat(string(rune('a'+day)), 40)
		if day == 2 {
			var kept []result.Step
			for _, s := range r.Steps {
				if s.Name == "apiserver/configmaps" && s.Rate == 400 {
					continue
				}
				if s.Name == "direct/validate" {
					s.P50Ms, s.P99Ms = s.P50Ms*2, s.P99Ms*2
				}
				kept = append(kept, s)
			}
			r.Steps = kept
		}
		runs = append(runs, r)
	}
	return runs
}

func TestTrendMarkdown(t *testing.T) {
	runs := nightlyRuns()
	var b bytes.Buffer
	require.NoError(t, TrendMarkdown(&b, runs))
	md := b.String()
	assert.Contains(t, md, "3 runs, oldest first.")
	assert.Contains(t, md, "| 1 | 2025-11-21 10:00 | aaaaaaaaaaaa |")
	assert.Contains(t, md, "| 3 | 2025-11-23 10:00 | cccccccccccc |")
	assert.Contains(t, md, "## direct/validate (direct: /validate-nvidia-com-v1alpha1-dynamographdeployment)\n\n| rate (req/s) | 1 | 2 | 3 |")

	first := runs[0].Steps[0] // direct/validate at 100 req/s
	last := runs[2].Steps[0]
	require.Equal(t, "direct/validate", last.Name)
	assert.Contains(t, md, "| 100 | "+formatMs(first.P50Ms)+" / "+formatMs(first.P99Ms)+" |")
	assert.Contains(t, md, " "+formatMs(last.P50Ms)+" / "+formatMs(last.P99Ms)+" |\n", "the slower last run shows in its column")
	lastLine := md[strings.LastIndex(strings.TrimSuffix(md, "\n"), "\n")+1:]
	assert.Regexp(t, `^\| 400 \| [0-9.]+ / [0-9.]+ \| [0-9.]+ / [0-9.]+ \| — \|\n$`, lastLine, "the step the last run lacks (apiserver/configmaps at 400 req/s) is a dash")
}

func TestTrendSVG(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, TrendSVG(&b, nightlyRuns()))
	d := parseSVG(t, b.Bytes())
	assert.Contains(t, d.texts, "Webhook latency over time")
	assert.Len(t, d.panelTitles, 4, "one panel per ladder")
	assert.Contains(t, d.series, "100 req/s p99")
	assert.Contains(t, d.series, "100 req/s p50")
	assert.Contains(t, d.ticks, "11-21 aaaaaaaaaaaa", "runs are labelled by date and revision")
	assert.Equal(t, 4, count(d.axisLabels, "run (date, revision)"))
	assertPointsInside(t, d)
}
