package mutate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

const source = `package p

import "log"

const limit = 7

func f(a, b int, err error) int {
	if a < b && err != nil {
		log.Println("x")
		g()
		return 3
	}
	return 0
}

func g() {}
`

func TestGoMutantsAndApply(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "p.go"), []byte(source), 0o600))
	ms, err := GoMutants(root, "p.go")
	require.NoError(t, err)
	got := map[string]string{}
	for _, m := range ms {
		out, err := m.Apply([]byte(source))
		require.NoError(t, err)
		lines := strings.Split(string(out), "\n")
		got[m.ID()] = strings.TrimSpace(lines[m.Line-1])
	}
	assert.Equal(t, map[string]string{
		"p.go:8:negate-condition": "if !(a < b && err != nil) {",
		"p.go:8:flip-logical":     "if a < b || err != nil {",
		"p.go:8:flip-comparison":  "if a <= b && err != nil {",
		"p.go:10:drop-call":       "_ = 0",
		"p.go:11:zero-constant":   "return 0",
	}, got, "log calls, `err != nil` flips, const declarations and zero literals are not mutated")
	for _, m := range ms {
		if m.Operator == OpZeroConstant {
			assert.Equal(t, "return 3", m.Source, "a mutant's Source is its line before the change, trimmed")
		}
	}
}

func TestApplyRejectsARangeOutsideTheFile(t *testing.T) {
	_, err := Mutant{File: "p.go", Line: 1, Operator: OpDropCall, Start: 5, End: 50}.Apply([]byte("short"))
	require.ErrorContains(t, err, "mutant p.go:1:drop-call: range [5,50) outside the file's 5 bytes")
}

// templateMutantsOf are the mutants of a chart template whose text is tpl.
func templateMutantsOf(t *testing.T, tpl string) ([]Mutant, error) {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "t.yaml"), []byte(tpl), 0o600))
	return TemplateMutants(root, "t.yaml")
}

func TestTemplateMutantsDropKeyLinesOnly(t *testing.T) {
	tpl := "{{- if .Values.x }}\napiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  port: 443\n  args:\n  - --flag\n{{- end }}\n"
	ms, err := templateMutantsOf(t, tpl)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	out, err := ms[0].Apply([]byte(tpl))
	require.NoError(t, err)
	assert.NotContains(t, string(out), "port: 443")
	assert.Contains(t, string(out), "spec:\n  args:\n  - --flag\n")
	assert.Equal(t, 9, ms[1].Line)
}

func TestTemplateMutantsSkipTemplateComments(t *testing.T) {
	tpl := "{{- /*\nTopologies:\n- cluster-wide: a ClusterRole\n*/ -}}\n{{/* - inline: comment */}}\nrules:\n- nonResourceURLs: [\"/metrics/*\"]\n  verbs: [get]\n"
	ms, err := templateMutantsOf(t, tpl)
	require.NoError(t, err)
	var lines []int
	for _, m := range ms {
		lines = append(lines, m.Line)
	}
	assert.Equal(t, []int{7, 8}, lines, "what the chart renders, not what its comments say")
}

func TestCoverageMapFindsTheSuitesReachingALine(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "p.out")
	require.NoError(t, os.WriteFile(profile, []byte("mode: atomic\n"+
		modulePath+"operator/internal/certs/a.go:10.2,14.3 3 5\n"+
		modulePath+"operator/internal/certs/a.go:20.2,21.3 1 0\n"), 0o600))
	m := coverageMap{}
	require.NoError(t, m.add("autocert", profile))
	require.NoError(t, m.add("hostile", profile))
	assert.Equal(t, []string{"hostile", "autocert"}, m.suitesReaching("operator/internal/certs/a.go", 12), "cheapest suite first")
	assert.Empty(t, m.suitesReaching("operator/internal/certs/a.go", 20), "a block never executed reaches nobody")
}

func TestCoverageMapFindsTheRestOfAStatementAfterAFunctionLiteral(t *testing.T) {
	// webhook/server.go as the cover tool counts `srv := &http.Server{…, BaseContext: func…,
	// …, ReadHeaderTimeout: 32 * time.Second, …}` (lines 91–99): the statement up to the function
	// literal, the literal's body, and nothing for lines 95–99.
	profile := filepath.Join(t.TempDir(), "p.out")
	require.NoError(t, os.WriteFile(profile, []byte("mode: atomic\n"+
		modulePath+"operator/internal/webhook/server.go:88.16,90.3 1 0\n"+
		modulePath+"operator/internal/webhook/server.go:91.2,94.57 1 1\n"+
		modulePath+"operator/internal/webhook/server.go:94.57,94.94 1 0\n"+
		modulePath+"operator/internal/webhook/server.go:100.2,104.40 4 1\n"), 0o600))
	m := coverageMap{}
	require.NoError(t, m.add("hostile", profile))
	assert.Equal(t, []string{"hostile"}, m.suitesReaching("operator/internal/webhook/server.go", 97), "the statement ran; the literal's body need not have")
	assert.Empty(t, m.suitesReaching("operator/internal/webhook/server.go", 89))
}

func TestReportListsSurvivorsFirst(t *testing.T) {
	r := &Report{Seed: 3, Candidates: 10, NotViable: 1, Outcomes: []Outcome{
		{Mutant: Mutant{File: "a.go", Line: 1, Operator: OpDropCall, Change: "`x()` removed"}, Killed: true, By: "C3", Suite: "autocert", Message: "expected a | b"},
		{Mutant: Mutant{File: "b.go", Line: 2, Operator: OpZeroConstant, Change: "`5` → `0`"}, NotRepeated: []string{"P3 (autocert): expected 0 failed admissions"}},
	}}
	md := r.Markdown()
	assert.Contains(t, md, "mutation score 50 %: 1 of 2 mutants killed, 1 survived (seed 3; 1 more did not compile; 10 candidates, 0 more known equivalent and not judged")
	assert.Contains(t, md, "| `b.go:2:zero-constant` | `5` → `0` | none reaches this line |")
	assert.Contains(t, md, "killed by C3 (autocert): expected a \\| b")
	assert.Contains(t, md, "**survived**; failed once, passed when run again alone (not a kill): P3 (autocert): expected 0 failed admissions")
}

func TestJudgeInOrderJudgesTheFirstViableCandidatesWhateverTheJobs(t *testing.T) {
	var candidates []Mutant
	for i := range 12 {
		candidates = append(candidates, Mutant{File: "f.go", Line: i + 1})
	}
	notCompiling := map[int]bool{2: true, 5: true, 6: true}
	for _, jobs := range []int{1, 2, 3, 5} {
		lanes := make([]job, jobs)
		for i := range lanes {
			lanes[i] = job{n: i + 1}
		}
		var running, most atomic.Int32
		judgeOne := func(_ context.Context, _ job, m Mutant) (Outcome, bool, error) {
			most.Store(max(most.Load(), running.Add(1)))
			defer running.Add(-1)
			// Later candidates finish first, so the jobs end out of order.
			time.Sleep(time.Duration(12-m.Line) * time.Millisecond)
			return Outcome{Mutant: m, Killed: m.Line%2 == 0}, !notCompiling[m.Line], nil
		}
		var lines []int
		notViable, err := judgeInOrder(context.Background(), candidates, 5, lanes, judgeOne, func(o Outcome) { lines = append(lines, o.Mutant.Line) })
		require.NoError(t, err)
		slices.Sort(lines)
		assert.Equal(t, []int{1, 3, 4, 7, 8}, lines, "%d jobs: the first 5 candidates that compile", jobs)
		assert.Equal(t, 3, notViable, "%d jobs", jobs)
		assert.LessOrEqual(t, int(most.Load()), jobs, "never more at once than jobs")
	}
}

func TestJudgeInOrderStopsStartingAfterAnError(t *testing.T) {
	candidates := []Mutant{{Line: 1}, {Line: 2}, {Line: 3}, {Line: 4}}
	var started atomic.Int32
	judgeOne := func(_ context.Context, _ job, m Mutant) (Outcome, bool, error) {
		started.Add(1)
		if m.Line == 1 {
			return Outcome{}, false, errors.New("scratch copy unwritable")
		}
		time.Sleep(20 * time.Millisecond)
		return Outcome{Mutant: m}, true, nil
	}
	var judged int
	_, err := judgeInOrder(context.Background(), candidates, 4, []job{{n: 1}, {n: 2}}, judgeOne, func(Outcome) { judged++ })
	require.ErrorContains(t, err, "scratch copy unwritable")
	assert.Equal(t, 2, int(started.Load()), "the job in progress ends; nothing new starts")
	assert.Equal(t, 1, judged, "the outcome of the job in progress is kept")
}

func TestOnlyPicksTheNamedMutantsInTheOrderNamed(t *testing.T) {
	cands := []Mutant{{File: "a.go", Line: 1, Operator: "drop-call"}, {File: "b.go", Line: 2, Operator: "zero-constant"}, {File: "b.go", Line: 2, Operator: "zero-constant", Start: 9}}
	got, err := only(cands, []string{"b.go:2:zero-constant", "a.go:1:drop-call"})
	require.NoError(t, err)
	assert.Equal(t, []Mutant{cands[1], cands[2], cands[0]}, got, "every candidate with the ID")
	_, err = only(cands, []string{"c.go:3:drop-call"})
	require.EqualError(t, err, `no candidate mutant is "c.go:3:drop-call": the report and `+"`go run ./scenarios/tools/cmd/gauntlet-mutate -list`"+` give their IDs (file:line:operator)`)
}

func TestJobsHaveTheirOwnClusterAndVersion(t *testing.T) {
	one, two := suiteArgs(job{n: 1}, suiteRun{suite: "hostile", out: "/out"}), suiteArgs(job{n: 2}, suiteRun{suite: "hostile", out: "/out"})
	assert.Contains(t, one, "--operator-version=mutant-1")
	assert.Contains(t, two, "--operator-version=mutant-2")
	assert.Contains(t, one, "--cluster-name=mutate-1-hostile")
	assert.Contains(t, two, "--cluster-name=mutate-2-hostile")
	assert.Contains(t, suiteArgs(job{n: 1}, suiteRun{suite: "hostile", out: "/out", cover: "/cover"}), "--cover-dir=/cover")
	assert.Contains(t, suiteArgs(job{n: 1}, suiteRun{suite: "autocert", out: "/out", scenario: "P3"}), "--labels=scenario=P3", "a failure that must repeat runs again alone")
}

func TestALoadFailureKillsOnlyWhenItRepeats(t *testing.T) {
	type call struct{ suite, scenario string }
	fails := func(script map[call]string) (suiteRunner, *[]call) {
		var calls []call
		return func(r suiteRun) (bool, string, string, error) {
			c := call{r.suite, r.scenario}
			calls = append(calls, c)
			by, ok := script[c]
			return ok, by, "expected 0 failed admissions", nil
		}, &calls
	}
	suites := []string{"certmanager", "autocert"}
	quiet := func(string, ...any) {}

	run, calls := fails(map[call]string{{"certmanager", ""}: "P3", {"autocert", ""}: "A1"})
	out := Outcome{}
	require.NoError(t, runUntilKilled(&out, suites, "/runs/m", run, quiet))
	assert.Equal(t, []call{{"certmanager", ""}, {"certmanager", "P3"}, {"autocert", ""}}, *calls, "P3 runs again alone; A1 is not repeated")
	assert.True(t, out.Killed)
	assert.Equal(t, "A1", out.By, "the P3 failure that did not repeat is not the kill")
	assert.Equal(t, []string{"P3 (certmanager): expected 0 failed admissions"}, out.NotRepeated)

	run, calls = fails(map[call]string{{"certmanager", ""}: "P3", {"certmanager", "P3"}: "P3"})
	out = Outcome{}
	require.NoError(t, runUntilKilled(&out, suites, "/runs/m", run, quiet))
	assert.Equal(t, []call{{"certmanager", ""}, {"certmanager", "P3"}}, *calls)
	assert.True(t, out.Killed)
	assert.Equal(t, "P3", out.By, "a P3 failure that repeats kills")
	assert.Empty(t, out.NotRepeated)
	assert.Equal(t, []string{"certmanager"}, out.Suites)
}

// Every entry of equivalent.yaml names mutants the workspace has today: an entry whose line was
// edited or removed would otherwise stop matching without a word, and its mutants would be
// judged again (or it would hide a new mutant that merely looks the same).
func TestEquivalentsMatchCandidates(t *testing.T) {
	root, err := workspace.Root()
	require.NoError(t, err)
	cands, err := Candidates(root)
	require.NoError(t, err)
	eqs, err := Equivalents()
	require.NoError(t, err)
	require.NotEmpty(t, eqs)
	for _, e := range eqs {
		matched := slices.ContainsFunc(cands, e.Matches)
		assert.True(t, matched, "%s: the entry for %s (%s, %q, %s) matches no candidate mutant: "+
			"give it the line's text as source and the change as `go run ./scenarios/tools/cmd/gauntlet-mutate -list` prints it, or remove it", EquivalentFile, e.File, e.Operator, e.Source, e.Change)
	}
	judge, equivalent := withoutEquivalents(cands, eqs)
	assert.Len(t, judge, len(cands)-len(equivalent))
}

func TestEquivalentsNeedEveryField(t *testing.T) {
	_, err := parseEquivalents([]byte("- file: a.yaml\n  operator: drop-template-line\n  source: \"x: y\"\n  change: \"line `x: y` removed\"\n"))
	require.EqualError(t, err, EquivalentFile+": entry 1 (a.yaml line `x: y` removed) needs file, operator, source, change and why")
	_, err = parseEquivalents([]byte("- file: a.yaml\n  reason: typo\n"))
	require.ErrorContains(t, err, EquivalentFile+": ")
	require.ErrorContains(t, err, `unknown field "reason"`)
}

func TestWithoutEquivalentsKeepsTheOthersInOrder(t *testing.T) {
	eq := Equivalent{File: "c.yaml", Operator: OpDropTemplateKey, Source: "protocol: TCP", Change: "line `protocol: TCP` removed", Why: "the default"}
	tcp := Mutant{File: "c.yaml", Line: 3, Operator: OpDropTemplateKey, Source: "protocol: TCP", Change: "line `protocol: TCP` removed"}
	udp := Mutant{File: "c.yaml", Line: 4, Operator: OpDropTemplateKey, Source: "protocol: UDP", Change: "line `protocol: UDP` removed"}
	other := Mutant{File: "d.yaml", Line: 3, Operator: OpDropTemplateKey, Source: "protocol: TCP", Change: "line `protocol: TCP` removed"}
	judge, equivalent := withoutEquivalents([]Mutant{udp, tcp, other}, []Equivalent{eq})
	assert.Equal(t, []Mutant{udp, other}, judge, "another line, or the same line in another file, is judged")
	assert.Equal(t, []Mutant{tcp}, equivalent)
	assert.Equal(t, &eq, EquivalentTo(tcp, []Equivalent{eq}))
	assert.Nil(t, EquivalentTo(udp, []Equivalent{eq}))
}
