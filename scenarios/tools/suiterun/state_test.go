package suiterun

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
)

// autocertOutput is how `go test -v ./e2e/autocert` interleaves the suite's progress lines with
// go test's and the tests' own.
const autocertOutput = `[   0.0s] suite autocert: provider local, Kubernetes v1.37.2, operator v0.0.0-e2e; scenarios A1 C1 C5; reports in /x/_output/e2e/autocert
[   0.1s] • Creating cluster e2e-autocert-4242 …
[   6.2s] ✓ Creating cluster e2e-autocert-4242 (6.1s)
[   6.2s] • Installing charts/dynamo-operator (automatic mode) …
=== RUN   TestAutoCert
=== RUN   TestAutoCert/A1_a_graph_without_components_is_denied
[  14.0s] ▶ A1 a graph without components is denied
=== RUN   TestAutoCert/A1_a_graph_without_components_is_denied/denied_with_the_field_path
[  15.1s] ✓ A1 passed (1.1s)
=== RUN   TestAutoCert/C1_the_operator_creates_its_certificate
[  15.2s] ▶ C1 the operator creates its certificate
    certs.go:88: expected a Secret webhook-server-cert with tls.crt; got none
[  45.3s] ✗ C1 failed (30.1s): expected a Secret webhook-server-cert with tls.crt; got none
[  45.3s]   artifacts: /x/_output/e2e/autocert/artifacts/C1
=== RUN   TestAutoCert/C5_the_CA_rotates_under_load
[  45.4s] ▶ C5 the CA rotates under load
`

func follow(output string) SuiteState {
	s := SuiteState{Name: "autocert", Status: Running, Activity: buildingActivity}
	for _, line := range strings.Split(strings.TrimSuffix(output, "\n"), "\n") {
		s.observe(line)
	}
	return s
}

func TestOutputFollowedIntoTheSuitesState(t *testing.T) {
	s := follow(autocertOutput)
	assert.Equal(t, "C5 the CA rotates under load", s.Activity)
	assert.Equal(t, 1, s.Passed)
	assert.Equal(t, 1, s.Failed)
	assert.Equal(t, 0, s.Skipped)
}

func TestActivityIsTheSuitesStepUntilAScenarioStarts(t *testing.T) {
	assert.Equal(t, buildingActivity, follow("# github.com/gauntlet-dev/gauntlet/e2e/autocert\n").Activity)
	s := follow("[   0.1s] • Creating cluster e2e-autocert-4242 …\n[   6.2s] ✓ Creating cluster e2e-autocert-4242 (6.1s)\n")
	assert.Equal(t, "Creating cluster e2e-autocert-4242", s.Activity)
	s = follow("[  14.0s] ▶ A1 a graph without components is denied\n[  15.1s] ✓ A1 passed (1.1s)\n")
	assert.Empty(t, s.Activity, "between two scenarios")
}

func TestScenariosRunAtOnceStayTheActivityUntilTheLastEnds(t *testing.T) {
	s := follow("[  50.0s] ▶ M4 lease failover after kill -9\n[  50.1s] ▶ M5 lease failover after SIGTERM\n[  50.1s] ▶ M12 no admission validated by nobody\n")
	assert.Equal(t, "M12 no admission validated by nobody (and 2 more at once)", s.Activity)
	s = follow("[  50.0s] ▶ M4 lease failover after kill -9\n[  50.1s] ▶ M5 lease failover after SIGTERM\n[  50.1s] ▶ M12 no admission validated by nobody\n" +
		"[ 140.0s] ✓ M12 passed (89.9s)\n[ 180.0s] ✓ M4 passed (130.0s)\n")
	assert.Equal(t, "M5 lease failover after SIGTERM", s.Activity, "M5 still runs")
	assert.Equal(t, 2, s.Passed)
}

func TestTheSummaryHasTheLastWord(t *testing.T) {
	s := follow(autocertOutput)
	sum := &report.Summary{Suite: "autocert", Scenarios: []report.Scenario{
		{ID: "A1", Result: report.Passed}, {ID: "C1", Result: report.Failed}, {ID: "C5", Result: report.Passed}, {ID: "S1", Result: report.Passed},
	}}
	s.end(time.Now(), errors.New("exit status 1"), sum)
	assert.Equal(t, Ended, s.Status)
	assert.Equal(t, 3, s.Passed, "C5 and S1 printed no end line the stream saw")
	assert.Equal(t, 1, s.Failed)
	assert.False(t, s.OK())
}

func TestExplanationOfASuiteThatEndedWithoutASummary(t *testing.T) {
	for name, tc := range map[string]struct{ output, want string }{
		"timeout": {
			"[1799.0s] ▶ P5 failover distribution\npanic: test timed out after 30m0s\n\trunning tests:\n\t\tTestMultiOperator (30m0s)\nFAIL\tgithub.com/gauntlet-dev/gauntlet/e2e/multioperator\t1800.1s\nFAIL\n",
			"panic: test timed out after 30m0s",
		},
		"compile error": {
			"# github.com/gauntlet-dev/gauntlet/e2e/hostile [github.com/gauntlet-dev/gauntlet/e2e/hostile.test]\ne2e/hostile/main_test.go:12:2: undefined: hostile.Featurez\nFAIL\tgithub.com/gauntlet-dev/gauntlet/e2e/hostile [build failed]\nFAIL\n",
			"e2e/hostile/main_test.go:12:2: undefined: hostile.Featurez",
		},
		"teardown failed": {
			"[ 200.0s] ✗ Deleting cluster e2e-hostile-4242 (0.2s): processes left: kube-apiserver (pid 77)\n[ 200.0s] suite hostile: 8 passed, 0 failed, 0 skipped in 200.0s → /x\nFAIL\tgithub.com/gauntlet-dev/gauntlet/e2e/hostile\t200.3s\nexit status 1\n",
			"[ 200.0s] ✗ Deleting cluster e2e-hostile-4242 (0.2s): processes left: kube-apiserver (pid 77)",
		},
	} {
		assert.Equal(t, tc.want, follow(tc.output).Explanation(), name)
	}
}
