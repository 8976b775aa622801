package conformance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

func summary(results map[string]report.Outcome) *report.Summary {
	s := &report.Summary{}
	for id, r := range results {
		details := map[string]any{}
		if r == report.Failed {
			details[report.MessageKey] = id + " failed: expected a, saw b"
		}
		s.Scenarios = append(s.Scenarios, report.Scenario{ID: id, Title: "check " + id, Result: r, Details: details})
	}
	return s
}

func TestGridJudgesEveryCheckInEveryMode(t *testing.T) {
	tg := &target.Target{Name: "demo",
		CertModes: target.CertModes{SelfManaged: &target.CertMode{}, CertManager: &target.CertMode{},
			NotApplicable: map[string]string{target.External: "no caBundle value"}},
		Divergences: []target.Divergence{
			{Check: "W2", Modes: []string{target.SelfManaged}, Why: "serves a self-signed leaf", Link: "https://example.com/1"},
			{Check: "W3", Why: "patches twice", Link: "https://example.com/2"},
			{Check: "W4", Why: "drops a request as a pod stops", Link: "https://example.com/3", Intermittent: true},
		}}
	g := NewGrid(tg, map[string]*report.Summary{
		target.SelfManaged: summary(map[string]report.Outcome{"W1": report.Passed, "W2": report.Failed, "W3": report.Failed, "W4": report.Failed, "W10": report.Failed}),
		target.CertManager: summary(map[string]report.Outcome{"W1": report.Passed, "W2": report.Failed, "W3": report.Passed, "W4": report.Passed}),
	}, nil)
	assert.Equal(t, []string{"W1", "W2", "W3", "W4", "W10"}, g.Checks, "catalog order")
	verdicts := map[string][]Verdict{}
	for _, id := range g.Checks {
		for _, m := range Modes {
			verdicts[id] = append(verdicts[id], g.Cells[id][m].Verdict)
		}
	}
	assert.Equal(t, map[string][]Verdict{
		"W1":  {Pass, Pass, NotApplicable},
		"W2":  {Reproduced, Unexpected, NotApplicable}, // declared for selfManaged only
		"W3":  {Reproduced, NoLonger, NotApplicable},
		"W4":  {Reproduced, Pass, NotApplicable}, // intermittent: a run may miss it
		"W10": {Unexpected, NotRun, NotApplicable},
	}, verdicts)
	assert.True(t, g.Failed())
	md := g.Markdown()
	assert.Contains(t, md, "| W2 check W2 | ⚠️ | ❌ | ➖ |")
	assert.Contains(t, md, "- **W2, certManager** ❌ W2 failed: expected a, saw b")
	assert.Contains(t, md, "- **W3, certManager** ❗ declared divergence no longer reproduces (patches twice): remove it from the description")
	assert.Contains(t, md, "- **external** ➖ no caBundle value")
	assert.Contains(t, md, "- **W4, certManager** ✅ declared intermittent divergence not seen this run (drops a request as a pod stops)")
}

func TestAGridOfPassesAndReproducedDivergencesSucceeds(t *testing.T) {
	tg := &target.Target{Name: "demo", CertModes: target.CertModes{SelfManaged: &target.CertMode{}},
		Divergences: []target.Divergence{{Check: "W2", Why: "x", Link: "https://example.com"}}}
	g := NewGrid(tg, map[string]*report.Summary{target.SelfManaged: summary(map[string]report.Outcome{"W1": report.Passed, "W2": report.Failed})}, nil)
	assert.False(t, g.Failed())
}

func TestAModeWithoutSummaryIsUnexpected(t *testing.T) {
	tg := &target.Target{Name: "demo", CertModes: target.CertModes{SelfManaged: &target.CertMode{}, CertManager: &target.CertMode{}}}
	g := NewGrid(tg, map[string]*report.Summary{target.SelfManaged: summary(map[string]report.Outcome{"W1": report.Passed}), target.CertManager: nil},
		map[string]string{target.CertManager: "out/certManager/go-test.log"})
	assert.Equal(t, Cell{Unexpected, "the suite wrote no summary: see out/certManager/go-test.log"}, g.Cells["W1"][target.CertManager])
	assert.True(t, g.Failed())
}

func TestAcrossPutsTargetsSideBySideAndNamesModesThatDoNotApply(t *testing.T) {
	one := &target.Target{Name: "one", CertModes: target.CertModes{SelfManaged: &target.CertMode{},
		NotApplicable: map[string]string{target.CertManager: "no cert-manager values", target.External: "no caBundle value"}}}
	two := &target.Target{Name: "two", CertModes: target.CertModes{SelfManaged: &target.CertMode{}, External: &target.CertMode{},
		NotApplicable: map[string]string{target.CertManager: "needs cert-manager v2"}},
		Divergences: []target.Divergence{{Check: "W2", Modes: []string{target.External}, Why: "leaf only", Link: "https://example.com"}}}
	grids := []Grid{
		NewGrid(one, map[string]*report.Summary{target.SelfManaged: summary(map[string]report.Outcome{"W1": report.Passed, "W10": report.Failed})}, nil),
		NewGrid(two, map[string]*report.Summary{
			target.SelfManaged: summary(map[string]report.Outcome{"W1": report.Passed, "W2": report.Passed}),
			target.External:    summary(map[string]report.Outcome{"W1": report.Passed, "W2": report.Failed}),
		}, nil),
	}
	md := Across(grids, func(i int) string { return grids[i].Target + "/report.md" })
	assert.Equal(t, `| check | one selfManaged | two selfManaged | two external |
|---|---|---|---|
| W1 check W1 | ✅ | ✅ | ✅ |
| W2 check W2 | · | ✅ | ⚠️ |
| W10 check W10 | ❌ | · | · |

✅ pass · ⚠️ known divergence reproduced · ❌ unexpected · ❗ known divergence no longer reproduces · 🔧 broken test (it could not run) · ➖ not applicable · `+"`·`"+` not run

- **one, certManager** ➖ no cert-manager values
- **one, external** ➖ no caBundle value
- **two, certManager** ➖ needs cert-manager v2
- one: [report](one/report.md) (why each cell is what it is)
- two: [report](two/report.md) (why each cell is what it is)
`, md)
}

// nightly is one target's grid on a cluster, as a nightly job's run writes it.
func nightly(t *target.Target, provider, version string, results map[string]report.Outcome) Grid {
	s := summary(results)
	s.Provider, s.KubernetesVersion = provider, version
	return NewGrid(t, map[string]*report.Summary{target.SelfManaged: s}, nil)
}

func TestGridsOfSeveralClustersSayWhichEachColumnRanOnAndWhatChanged(t *testing.T) {
	demo := &target.Target{Name: "demo",
		CertModes:   target.CertModes{SelfManaged: &target.CertMode{}, NotApplicable: map[string]string{target.CertManager: "none", target.External: "none"}},
		Divergences: []target.Divergence{{Check: "W9", Why: "drops a request as a pod stops", Link: "https://example.com/9"}}}
	grids := []Grid{
		nightly(demo, "local", "v1.37.2", map[string]report.Outcome{"W1": report.Passed, "W9": report.Failed}),
		nightly(demo, "kind", "v1.37.2", map[string]report.Outcome{"W1": report.Failed, "W9": report.Passed}),
	}
	assert.Empty(t, grids[0].Changed(), "a declared divergence that reproduced is no change")
	assert.Equal(t, []string{
		"demo W1 selfManaged (kind, v1.37.2): ❌ W1 failed: expected a, saw b",
		"demo W9 selfManaged (kind, v1.37.2): ❗ declared divergence no longer reproduces (drops a request as a pod stops): remove it from the description",
	}, grids[1].Changed())
	md := Across(grids, func(i int) string { return []string{"a/demo/report.md", "b/demo/report.md"}[i] })
	assert.Contains(t, md, "| check | demo selfManaged<br>local v1.37.2 | demo selfManaged<br>kind v1.37.2 |\n")
	assert.Contains(t, md, "| W9 check W9 | ⚠️ | ❗ |")
	assert.Contains(t, md, "- demo on kind v1.37.2: [report](b/demo/report.md)")
	assert.Equal(t, 1, strings.Count(md, "**demo, certManager** ➖"), "a mode that applies nowhere is named once")
}

func TestReadGridsReadsEveryTargetOfARun(t *testing.T) {
	demo := &target.Target{Name: "demo", CertModes: target.CertModes{SelfManaged: &target.CertMode{}}}
	part := t.TempDir()
	g := nightly(demo, "local", "v1.37.2", map[string]report.Outcome{"W1": report.Passed})
	raw, err := json.Marshal(g)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(part, "demo", target.SelfManaged), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(part, "demo", report.SummaryFile), raw, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(part, "report.md"), []byte("a file beside the targets"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(part, "notarun"), 0o750))
	grids, reports, _, err := ReadGrids(part)
	require.NoError(t, err)
	require.Len(t, grids, 1)
	assert.Equal(t, "local", grids[0].Provider)
	assert.Equal(t, Pass, grids[0].Cells["W1"][target.SelfManaged].Verdict)
	assert.Equal(t, []string{filepath.Join(part, "demo", "report.md")}, reports)

	_, _, _, err = ReadGrids(t.TempDir())
	require.ErrorContains(t, err, "holds no target's grid (<target>/summary.json): give the -out of a `make e2e-conformance` run")
	require.NoError(t, os.WriteFile(filepath.Join(part, "demo", report.SummaryFile), []byte(`{"Suite":"conformance"}`), 0o600))
	_, _, _, err = ReadGrids(part)
	assert.ErrorContains(t, err, "not a target's grid")
}

func TestGridHasARowPerChainsawTestAndSetsBrokenTestsApart(t *testing.T) {
	tg := &target.Target{Name: "gatekeeper",
		CertModes: target.CertModes{SelfManaged: &target.CertMode{}, NotApplicable: map[string]string{target.CertManager: "none", target.External: "none"}}}
	s := summary(map[string]report.Outcome{"W1": report.Passed, "W10": report.Passed, "gatekeeper/require-owner": report.Failed, "gatekeeper/assign-owner": report.Passed})
	s.Scenarios = append(s.Scenarios, report.Scenario{ID: "gatekeeper/typo", Title: "Chainsaw test typo", Result: report.Failed,
		Details: map[string]any{report.MessageKey: "broken test: chainsaw/typo/chainsaw-test.yaml:8: Chainsaw cannot load the test: …", report.BrokenKey: true}})
	g := NewGrid(tg, map[string]*report.Summary{target.SelfManaged: s}, nil)
	assert.Equal(t, []string{"W1", "W10", "gatekeeper/assign-owner", "gatekeeper/require-owner", "gatekeeper/typo"}, g.Checks, "the W checks first, then the target's tests")
	assert.Equal(t, Pass, g.Cells["gatekeeper/assign-owner"][target.SelfManaged].Verdict)
	assert.Equal(t, Unexpected, g.Cells["gatekeeper/require-owner"][target.SelfManaged].Verdict)
	assert.Equal(t, Broken, g.Cells["gatekeeper/typo"][target.SelfManaged].Verdict)
	assert.Equal(t, []string{
		"gatekeeper gatekeeper/require-owner selfManaged: ❌ gatekeeper/require-owner failed: expected a, saw b",
		"gatekeeper gatekeeper/typo selfManaged: 🔧 broken test: chainsaw/typo/chainsaw-test.yaml:8: Chainsaw cannot load the test: …",
	}, g.Changed())
}
