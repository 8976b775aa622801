package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/operator/doctorreport"
)

func fixedOutcome(o outcome) func(context.Context, *session) outcome {
	return func(context.Context, *session) outcome { return o }
}

func TestRunnerNamesOneRootPerFault(t *testing.T) {
	ran := map[string]bool{}
	track := func(id string, o outcome) func(context.Context, *session) outcome {
		return func(context.Context, *session) outcome { ran[id] = true; return o }
	}
	checks := []check{
		{id: "a", title: "a", run: track("a", failure("a title", documented(t8, "Service x not found", "helm upgrade")))},
		{id: "b", title: "b title", needs: []string{"a"}, run: track("b", pass("b"))},
		{id: "c", title: "c", after: []string{"b"}, run: track("c", failure("c title", undocumented("call failed", "fix c")))},
		{id: "d", title: "d", after: []string{"a"}, run: track("d", pass("d passed"))},
		{id: "e", title: "e", run: track("e", failure("e title", documented(t10, "cannot create secrets", "helm upgrade")))},
		{id: "f", title: "f", needs: []string{"d"}, run: track("f", skip("f title", "nothing to examine"))},
		{id: "g", title: "g", after: []string{"not-run"}, run: track("g", failure("g title", undocumented("g failed", "fix g")))},
	}
	d := &Doctor{opts: Options{Release: "dynamo", Namespace: "dynamo-system"}.withDefaults()}
	report := d.run(context.Background(), checks)
	require.Len(t, report, len(checks))

	want := map[string]struct {
		status    Status
		dependsOn []string
	}{
		"a": {StatusFail, nil},
		"b": {StatusSkipped, []string{"a"}},
		"c": {StatusConsequence, []string{"a"}},
		"d": {StatusPass, nil},
		"e": {StatusFail, nil},
		"f": {StatusSkipped, nil},
		"g": {StatusFail, nil},
	}
	for _, res := range report {
		w := want[res.ID]
		assert.Equal(t, w.status, res.Status, "status of %s", res.ID)
		assert.Equal(t, w.dependsOn, res.DependsOn, "dependsOn of %s", res.ID)
		assert.Equal(t, res.Status == StatusPass, res.OK, "ok of %s", res.ID)
	}
	assert.False(t, ran["b"], "a check whose input is missing must not run")
	assert.True(t, ran["c"] && ran["d"] && ran["f"])

	a, _ := report.Find("a")
	assert.Equal(t, "T8", a.Scenario)
	assert.Equal(t, "a title", a.Title)
	assert.Equal(t, `T8 webhook Service deleted: Service x not found (symptom: service "<name>" not found in the failed-call error)`, a.Cause)
	assert.Equal(t, "restore Service:\nhelm upgrade", a.Fix)
	b, _ := report.Find("b")
	assert.Equal(t, "b title", b.Title, "a skipped check keeps its static title")
	assert.Equal(t, "skipped: depends on a", b.Cause)

	var roots []string
	for _, r := range report.Roots() {
		roots = append(roots, r.ID)
	}
	assert.Equal(t, []string{"a", "e", "g"}, roots)
	assert.False(t, report.Healthy())
}

func TestReportText(t *testing.T) {
	report := Report{
		{Result: doctorreport.Result{ID: "api-server", Title: "API server reachable", OK: true, Status: StatusPass, Details: []string{"not shown for passes"}}},
		{Result: doctorreport.Result{ID: "webhook-service", Title: "Service exists", Status: StatusFail, Scenario: "T8",
			Cause: "T8 webhook Service deleted: Service ns/svc not found", Fix: "restore Service:\nhelm upgrade x", Details: []string{"detail one"}}},
		{Result: doctorreport.Result{ID: "service-endpoints", Title: "endpoints ready", Status: StatusSkipped, Cause: "skipped: depends on webhook-service", DependsOn: []string{"webhook-service"}}},
		{Result: doctorreport.Result{ID: "admission-dry-run", Title: "dry-run", Status: StatusConsequence, Scenario: "T8", Cause: "T8 …", Fix: "not shown", DependsOn: []string{"webhook-service"}}},
	}
	var b bytes.Buffer
	require.NoError(t, report.WriteText(&b))
	assert.Equal(t, `✓ api-server         API server reachable
✗ webhook-service    Service exists
    cause: T8 webhook Service deleted: Service ns/svc not found
    fix:   restore Service:
           helm upgrade x
      · detail one
– service-endpoints  endpoints ready (skipped: depends on webhook-service)
✗ admission-dry-run  dry-run (consequence of webhook-service)
    cause: T8 …
unhealthy: 1 root cause: webhook-service (T8); 1 consequential failures, 1 skipped
`, b.String())

	healthy := Report{{Result: doctorreport.Result{ID: "a", Title: "A", OK: true, Status: StatusPass}}, {Result: doctorreport.Result{ID: "bb", Title: "B", OK: true, Status: StatusPass}}}
	b.Reset()
	require.NoError(t, healthy.WriteText(&b))
	assert.Equal(t, "✓ a   A\n✓ bb  B\nhealthy: all 2 checks passed\n", b.String())
	assert.True(t, healthy.Healthy())
	assert.False(t, Report{}.Healthy(), "no checks is not healthy")
}

func TestReportJSON(t *testing.T) {
	report := Report{
		{Result: doctorreport.Result{ID: "a", Title: "A", OK: true, Status: StatusPass, Details: []string{"x <y> & z"}}},
		{Result: doctorreport.Result{ID: "b", Title: "B", Status: StatusFail, Scenario: "T1", Cause: "c", Fix: "f"}},
	}
	var b bytes.Buffer
	require.NoError(t, report.WriteJSON(&b))
	assert.Contains(t, b.String(), `"x <y> & z"`, "JSON output must stay readable (no HTML escaping)")
	var decoded []map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &decoded))
	require.Len(t, decoded, 2)
	for _, key := range []string{"id", "title", "ok", "cause", "fix"} {
		assert.Contains(t, decoded[1], key)
	}
	assert.Equal(t, "T1", decoded[1]["scenario"])
	assert.Equal(t, false, decoded[1]["ok"])

	b.Reset()
	require.NoError(t, Report(nil).WriteJSON(&b))
	assert.Equal(t, "[]\n", b.String())
}

func TestRunnerStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	checks := []check{
		{id: "a", title: "a", run: func(context.Context, *session) outcome { cancel(); return pass("a") }},
		{id: "b", title: "b", run: fixedOutcome(failure("b", undocumented("never", "x")))},
	}
	d := &Doctor{opts: Options{Release: "dynamo", Namespace: "dynamo-system"}.withDefaults()}
	report := d.run(ctx, checks)
	b, _ := report.Find("b")
	assert.Equal(t, StatusSkipped, b.Status)
	assert.Equal(t, "skipped: the doctor ran out of time (--timeout): context canceled", b.Cause)
	assert.Empty(t, report.Roots())
	assert.False(t, report.Healthy())
}
