package doctor

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
)

func TestDiagnoseNamesTheDoctorAndItsRootCauses(t *testing.T) {
	rep := Report{ExitCode: ExitUnhealthy, Results: []Result{
		{ID: "ca-bundle", Status: StatusFail, Scenario: "T3"},
		{ID: "admission-dry-run", Status: "consequence"},
	}}
	d := Webhook.Diagnose(rep, "ca-bundle")
	assert.Equal(t, Diagnosis{Doctor: "kubectl-webhook-doctor", Expected: "ca-bundle", Named: []string{"ca-bundle (T3)"}}, d)
	assert.True(t, d.Found())
	assert.False(t, Webhook.Diagnose(rep, "certificate-secret").Found())
}

// readBack is summaries as a report reads them from summary.json: details are JSON values.
func readBack(t *testing.T, summaries []report.Summary) []report.Summary {
	t.Helper()
	data, err := json.Marshal(summaries)
	require.NoError(t, err)
	var out []report.Summary
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}

func TestScoreOfCountsRecallAndPrecisionOverEveryNotedDiagnosis(t *testing.T) {
	scenario := func(id string, ds ...Diagnosis) report.Scenario {
		return report.Scenario{ID: id, Details: map[string]any{DiagnosisNote: ds}}
	}
	summaries := []report.Summary{
		{Suite: "troubleshooting", Scenarios: []report.Scenario{
			scenario("T3", Diagnosis{"kubectl-dynamo", "ca-bundle", []string{"ca-bundle (T3)"}}, Diagnosis{"kubectl-dynamo", "ca-bundle", []string{"ca-bundle (T3)"}}),
			scenario("T6", Diagnosis{"kubectl-dynamo", "service-endpoints", []string{"service-endpoints (T6)", "operator-deployment"}}),
			{ID: "T1", Details: map[string]any{"other": 1}},
		}},
		{Suite: "selfManaged", Scenarios: []report.Scenario{
			scenario("W6", Diagnosis{"kubectl-webhook-doctor", "certificate-secret", []string{"serving-certificate (T4)"}}),
		}},
	}
	for name, s := range map[string][]report.Summary{"in memory": summaries, "read back": readBack(t, summaries)} {
		score := ScoreOf(s)
		assert.Equal(t, 4, score.Faults, name)
		assert.Equal(t, 3, score.Found, name)
		assert.Equal(t, 5, score.Named, name)
		assert.Equal(t, "Doctor: named the injected fault's root cause in 3 of 4 diagnoses (recall 75%); 3 of the 5 root causes it named were the injected fault's (precision 60%); missed: selfManaged W6 (kubectl-webhook-doctor): certificate-secret expected, named [serving-certificate (T4)]",
			score.String(), name)
	}
}

func TestScoreOfNoDiagnosisSaysNothing(t *testing.T) {
	assert.Empty(t, ScoreOf([]report.Summary{{Suite: "s", Scenarios: []report.Scenario{{ID: "A1"}}}}).String())
}
