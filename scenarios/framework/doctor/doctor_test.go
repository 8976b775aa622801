package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const unhealthy = `[
  {"id": "api-server", "title": "reachable", "ok": true, "status": "pass"},
  {"id": "service-endpoints", "title": "endpoints", "ok": false, "status": "fail", "scenario": "T6", "cause": "T6 operator scaled to 0"},
  {"id": "operator-logs", "title": "logs", "ok": false, "status": "consequence", "dependsOn": ["service-endpoints"]}
]`

func TestAReportNamesItsRootCauses(t *testing.T) {
	rep, err := Parse(ExitUnhealthy, []byte(unhealthy))
	require.NoError(t, err)
	got := rep.RootNames()
	assert.Equal(t, []string{"service-endpoints (T6)"}, got, "root causes: expected [service-endpoints (T6)], saw %v", got)
	assert.True(t, rep.NamesRoot("service-endpoints"), "expected service-endpoints among the root causes of %s", rep)
	assert.False(t, rep.NamesRoot("operator-logs"), "a consequence is no root cause: %s", rep)
	assert.False(t, rep.Healthy(), "a report with a failed check is not healthy")
	s := rep.String()
	assert.Contains(t, s, "✗ service-endpoints (T6): T6 operator scaled to 0", "summary: %s", s)
	assert.Contains(t, s, "operator-logs (consequence of service-endpoints)", "summary: %s", s)
}

func TestHealthyNeedsExitZeroAndEveryCheck(t *testing.T) {
	out := `[{"id": "api-server", "title": "reachable", "ok": true, "status": "pass"}]`
	for code, want := range map[int]bool{ExitHealthy: true, ExitUnhealthy: false} {
		rep, err := Parse(code, []byte(out))
		require.NoError(t, err)
		assert.Equal(t, want, rep.Healthy(), "exit %d, every check passed: expected healthy=%t", code, want)
	}
}

func TestAReportThatIsNoListOfChecksIsAnError(t *testing.T) {
	_, err := Parse(ExitHealthy, []byte(`[]`))
	require.EqualError(t, err, "the doctor's JSON report lists no checks")
	_, err = Parse(ExitUnhealthy, []byte("Error: unknown flag: --service\n"))
	assert.ErrorContains(t, err, `decoding the doctor's JSON report: invalid character 'E' looking for beginning of value (output: "Error: unknown flag: --service\n")`)
}

// fakeDoctor is a doctor that prints out and exits with code.
func fakeDoctor(t *testing.T, out string, code int) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-fake")
	script := "#!/bin/sh\ncat <<'JSON'\n" + out + "\nJSON\necho 'some reason' >&2\nexit " + strconv.Itoa(code) + "\n"
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o700)) //nolint:gosec // G306: an executable the test runs
	return bin
}

func TestRunReadsTheReportOfAnUnhealthyExit(t *testing.T) {
	rep, err := run(context.Background(), "kubectl-fake", fakeDoctor(t, unhealthy, ExitUnhealthy), []string{"-o", "json"})
	require.NoError(t, err)
	assert.Equal(t, ExitUnhealthy, rep.ExitCode, "exit status")
	assert.Equal(t, []string{"service-endpoints (T6)"}, rep.RootNames(), "root causes of %s", rep)
}

func TestRunRefusesAnExitOutsideTheContract(t *testing.T) {
	_, err := run(context.Background(), "kubectl-fake", fakeDoctor(t, "", 2), []string{"--bogus"})
	assert.EqualError(t, err, "kubectl-fake --bogus exited 2 (expected 0 healthy or 1 unhealthy): some reason")
}
