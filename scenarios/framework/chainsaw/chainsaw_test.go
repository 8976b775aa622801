package chainsaw

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o750))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

const minimalTest = `apiVersion: chainsaw.kyverno.io/v1alpha1
kind: Test
metadata:
  name: x
spec:
  description: >-
    A ConfigMap without
    an owner is denied
  steps: []
`

func TestDiscoverNamesEachTestByItsDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, Dir, "require-owner", "chainsaw-test.yaml"), minimalTest)
	write(t, filepath.Join(dir, Dir, "policies", "mutate", "chainsaw-test.yml"), "not: [yaml")
	write(t, filepath.Join(dir, Dir, "require-owner", "configmap.yaml"), "kind: ConfigMap")
	tests, err := Discover(dir)
	require.NoError(t, err)
	require.Len(t, tests, 2)
	assert.Equal(t, "policies/mutate", tests[0].Name)
	assert.Equal(t, "gatekeeper/policies/mutate", tests[0].ID("gatekeeper"))
	assert.Equal(t, "Chainsaw test policies/mutate", tests[0].Title(), "a test that does not parse still has a row")
	assert.Equal(t, "require-owner", tests[1].Name)
	assert.Equal(t, "A ConfigMap without an owner is denied", tests[1].Title())
	assert.Equal(t, filepath.Join(dir, Dir, "require-owner", "chainsaw-test.yaml"), tests[1].File)
	assert.Empty(t, tests[1].Config)
}

func TestDiscoverWithoutAChainsawDirectoryFindsNone(t *testing.T) {
	tests, err := Discover(t.TempDir())
	require.NoError(t, err)
	assert.Empty(t, tests)
}

func TestDiscoverRefusesATestInsideAnother(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, Dir, "outer", "chainsaw-test.yaml"), minimalTest)
	write(t, filepath.Join(dir, Dir, "outer", "inner", "chainsaw-test.yaml"), minimalTest)
	_, err := Discover(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "inside test")
	assert.Contains(t, err.Error(), filepath.Join("outer", "inner", "chainsaw-test.yaml"))
}

func TestDiscoverRefusesATestAtTheTopOfTheDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, Dir, "chainsaw-test.yaml"), minimalTest)
	_, err := Discover(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "directory of its own")
}

func TestDiscoverPassesTheTargetsChainsawConfiguration(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, Dir, ConfigFile), "apiVersion: chainsaw.kyverno.io/v1alpha2\nkind: Configuration\n")
	write(t, filepath.Join(dir, Dir, "a", "chainsaw-test.yaml"), minimalTest)
	tests, err := Discover(dir)
	require.NoError(t, err)
	require.Len(t, tests, 1)
	assert.Equal(t, filepath.Join(dir, Dir, ConfigFile), tests[0].Config)
	assert.Contains(t, strings.Join(Args(tests[0], "v.yaml", "out"), " "), "--config "+filepath.Join(dir, Dir, ConfigFile))
}

func TestArgsRunOneTestWithTheValuesAndAJSONReport(t *testing.T) {
	args := Args(Test{Name: "a", Dir: "/t/chainsaw/a"}, "/run/values.yaml", "/run")
	assert.Equal(t, []string{"test", "--test-dir", "/t/chainsaw/a", "--values", "/run/values.yaml",
		"--report-format", "JSON", "--report-path", "/run", "--report-name", "chainsaw-report", "--no-color"}, args)
}

func TestBindingsAreTheValuesTestsRead(t *testing.T) {
	b := Bindings{Target: "gatekeeper", Mode: "certManager", Namespace: "gatekeeper-system", Release: "gatekeeper",
		Service: "gatekeeper-webhook-service", Secret: "gatekeeper-webhook-server-cert", Deployment: "gatekeeper-controller-manager",
		Webhooks: []string{"validation.gatekeeper.sh"}}
	out, err := yaml.Marshal(b) //nolint:gosec // G117: Secret is the serving Secret's name, not its content
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(out, &values))
	assert.Equal(t, map[string]any{"target": "gatekeeper", "mode": "certManager", "namespace": "gatekeeper-system", "release": "gatekeeper",
		"service": "gatekeeper-webhook-service", "secret": "gatekeeper-webhook-server-cert", "deployment": "gatekeeper-controller-manager",
		"webhooks": []any{"validation.gatekeeper.sh"}}, values)
}

// A report as Chainsaw v0.2.12 writes it (pkg/report/json.go), one step failed.
const failedReport = `{
  "name": "chainsaw-report",
  "tests": [{
    "basePath": "/t/chainsaw/require-owner",
    "name": "require-owner",
    "namespace": "chainsaw-happy-cat",
    "steps": [
      {"name": "admitted with an owner", "operations": [{"name": "create-0", "type": "create"}]},
      {"name": "denied without one", "operations": [
        {"name": "create-0", "type": "create", "failure": {"error": "expected an error,\n got none"}},
        {"type": "assert", "failure": {"error": "v1/ConfigMap/x - metadata.labels.owner: Invalid value"}}
      ]}
    ]
  }]
}`

func TestParseReportNamesEachFailedOperationWithItsStep(t *testing.T) {
	res, err := ParseReport([]byte(failedReport))
	require.NoError(t, err)
	assert.Equal(t, Failed, res.Outcome)
	assert.Equal(t, `step "denied without one", create create-0: expected an error, got none; step "denied without one", assert: v1/ConfigMap/x - metadata.labels.owner: Invalid value`, res.Message)
	assert.Len(t, res.Failures, 2)
}

func TestParseReportPassesATestWithoutFailures(t *testing.T) {
	res, err := ParseReport([]byte(`{"tests": [{"name": "a", "steps": [{"name": "s", "operations": [{"type": "apply"}]}]}]}`))
	require.NoError(t, err)
	assert.Equal(t, Result{Outcome: Passed}, res)
}

func TestParseReportSkipsATestThatSkipsItself(t *testing.T) {
	res, err := ParseReport([]byte(`{"tests": [{"name": "a", "skipped": true}]}`))
	require.NoError(t, err)
	assert.Equal(t, Skipped, res.Outcome)
}

func TestParseReportFailsAnEmptyReport(t *testing.T) {
	res, err := ParseReport([]byte(`{"name": "chainsaw-report"}`))
	require.NoError(t, err)
	assert.Equal(t, Failed, res.Outcome)
}

// loadFailedOutput is Chainsaw v0.2.12's output on a test it cannot load (its last lines, as it printed them here).
const loadFailedOutput = `Version: v0.2.12
Loading default configuration...
- Using test file: chainsaw-test
- TestDirs [/t/chainsaw/broken]
Loading tests...
Error: failed to parse document (spec.steps[0].try[0].creat: Invalid value: value provided for unknown field)
`

func TestJudgeReportsATestChainsawCannotLoadAsBrokenWithFileAndLine(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "chainsaw-test.yaml")
	write(t, file, "apiVersion: chainsaw.kyverno.io/v1alpha1\nkind: Test\nmetadata:\n  name: broken\nspec:\n  steps:\n  - try:\n    - creat:\n        file: cm.yaml\n")
	res, err := judge(Test{Name: "broken", File: file}, 1, []byte(loadFailedOutput), nil, fs.ErrNotExist)
	require.NoError(t, err)
	assert.Equal(t, Broken, res.Outcome)
	assert.Equal(t, file+":8: Chainsaw cannot load the test: failed to parse document (spec.steps[0].try[0].creat: Invalid value: value provided for unknown field)", res.Message)
}

func TestJudgeFailsAChainsawThatStoppedAfterLoadingWithoutAReport(t *testing.T) {
	out := strings.Replace(loadFailedOutput, "Error: failed to parse document", "- broken (/t)\nLoading values...\nRunning tests...\nError: invalid configuration", 1)
	res, err := judge(Test{Name: "broken"}, 1, []byte(out), nil, fs.ErrNotExist)
	require.NoError(t, err)
	assert.Equal(t, Failed, res.Outcome, "not a broken test: the test loaded")
	assert.Contains(t, res.Message, "Chainsaw exited 1 before running the test: invalid configuration")
}

func TestJudgeFailsANonZeroExitWhoseReportHasNoFailure(t *testing.T) {
	res, err := judge(Test{}, 2, []byte("Error: boom\n"), []byte(`{"tests": [{"name": "a"}]}`), nil)
	require.NoError(t, err)
	assert.Equal(t, Failed, res.Outcome)
	assert.Contains(t, res.Message, "exited 2")
}

func TestJudgeIsAnErrorWhenChainsawSaysNothing(t *testing.T) {
	_, err := judge(Test{}, 0, nil, nil, fs.ErrNotExist)
	require.Error(t, err)
	_, err = judge(Test{}, 1, nil, nil, errors.New("permission denied"))
	require.Error(t, err)
}

func TestLocateFindsTheLineOfAYAMLSyntaxErrorFromTheFilesStart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "chainsaw-test.yaml")
	// The second document's error: Chainsaw counts its line from the document (line 4), the
	// file has it on line 7.
	write(t, file, "apiVersion: v1\nkind: Test\n---\napiVersion: v1\nkind: Test\nspec:\n  steps: a: b\n")
	assert.Equal(t, 7, Locate(file, "failed to parse document (error converting YAML to JSON: yaml: line 4: mapping values are not allowed in this context)"))
}

func TestLocatePointsAtAMissingFieldsParent(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "chainsaw-test.yaml")
	write(t, file, "apiVersion: v1\nkind: Test\nspec:\n  steps:\n  - name: a\n    try:\n    - assert: {}\n")
	assert.Equal(t, 7, Locate(file, "spec.steps[0].try[0].assert.file: Required value"))
	assert.Equal(t, 0, Locate(file, "something else entirely"))
}
