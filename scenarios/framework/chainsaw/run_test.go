package chainsaw

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeChainsaw is a stand-in for the Chainsaw binary: it records its arguments, its KUBECONFIG
// and the values file it was given, and prints what the test's env says, writing Chainsaw's
// report only when REPORT is set.
const fakeChainsaw = `#!/bin/sh
printf '%s\n' "$@" > "$RECORD/args"
printf '%s' "$KUBECONFIG" > "$RECORD/kubeconfig"
while [ $# -gt 0 ]; do
  case "$1" in
    --values) cp "$2" "$RECORD/values.yaml"; shift ;;
    --report-path) dir="$2"; shift ;;
  esac
  shift
done
echo "Version: v0.2.12"
echo "Loading tests..."
if [ -n "$REPORT" ]; then
  echo "Loading values..."
  printf '%s' "$REPORT" > "$dir/chainsaw-report.json"
  exit "$EXIT"
fi
echo "Error: failed to parse document (spec.steps[0].try[0].creat: Invalid value: value provided for unknown field)" >&2
exit 1
`

func fake(t *testing.T, report string, exit string) (Runner, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "chainsaw")
	require.NoError(t, os.WriteFile(bin, []byte(fakeChainsaw), 0o700)) //nolint:gosec // G306: an executable for the test
	record := filepath.Join(dir, "record")
	require.NoError(t, os.MkdirAll(record, 0o750))
	t.Setenv("RECORD", record)
	t.Setenv("REPORT", report)
	t.Setenv("EXIT", exit)
	return Runner{Binary: bin, Kubeconfig: "/clusters/e2e/kubeconfig"}, record
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path) //nolint:gosec // G304: a file under t.TempDir()
	require.NoError(t, err)
	return string(data)
}

func TestRunPassesTheBindingsAndTheClusterAndReadsTheReport(t *testing.T) {
	r, record := fake(t, failedReport, "1")
	test := Test{Name: "require-owner", Dir: "/targets/gatekeeper/chainsaw/require-owner"}
	out := t.TempDir()
	res, err := r.Run(context.Background(), test, Bindings{Target: "gatekeeper", Mode: "certManager", Namespace: "gatekeeper-system",
		Service: "gatekeeper-webhook-service", Secret: "gatekeeper-webhook-server-cert"}, out)
	require.NoError(t, err)
	assert.Equal(t, Failed, res.Outcome)
	assert.Contains(t, res.Message, `step "denied without one", create create-0: expected an error, got none`)

	assert.Equal(t, "/clusters/e2e/kubeconfig", read(t, filepath.Join(record, "kubeconfig")), "Chainsaw talks to the suite's cluster")
	assert.Equal(t, strings.Join(Args(test, filepath.Join(out, ValuesFile), out), "\n")+"\n", read(t, filepath.Join(record, "args")))
	values := read(t, filepath.Join(record, "values.yaml"))
	for _, want := range []string{"mode: certManager", "namespace: gatekeeper-system", "service: gatekeeper-webhook-service", "secret: gatekeeper-webhook-server-cert"} {
		assert.Contains(t, values, want)
	}
	assert.FileExists(t, filepath.Join(out, ReportFile))
	assert.Contains(t, read(t, filepath.Join(out, OutputFile)), "Loading values...", "Chainsaw's output is kept")
}

func TestRunReportsATestThatDoesNotLoadAsBroken(t *testing.T) {
	r, _ := fake(t, "", "1")
	dir := t.TempDir()
	file := filepath.Join(dir, "chainsaw-test.yaml")
	write(t, file, "apiVersion: chainsaw.kyverno.io/v1alpha1\nkind: Test\nmetadata:\n  name: broken\nspec:\n  steps:\n  - try:\n    - creat:\n        file: cm.yaml\n")
	out := t.TempDir()
	res, err := r.Run(context.Background(), Test{Name: "broken", Dir: dir, File: file}, Bindings{}, out)
	require.NoError(t, err)
	assert.Equal(t, Broken, res.Outcome)
	assert.True(t, strings.HasPrefix(res.Message, file+":8: Chainsaw cannot load the test: failed to parse document"), res.Message)
	assert.NoFileExists(t, filepath.Join(out, ReportFile))
}

func TestRunPassesAPassingTest(t *testing.T) {
	r, _ := fake(t, `{"tests": [{"name": "a", "steps": [{"name": "s", "operations": [{"type": "create"}]}]}]}`, "0")
	res, err := r.Run(context.Background(), Test{Name: "a", Dir: "/t/a"}, Bindings{}, t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, Passed, res.Outcome)
}

func TestRunIsAnErrorWhenChainsawIsMissing(t *testing.T) {
	_, err := Runner{Binary: filepath.Join(t.TempDir(), "none")}.Run(context.Background(), Test{Name: "a"}, Bindings{}, t.TempDir())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "running Chainsaw test a")
}

func TestBuildFailureNamesThePinnedVersionAndTheBuildError(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, ToolsModule, "go.mod"), "module x\n\ngo 1.26.0\n\ntool github.com/kyverno/chainsaw\n\nrequire github.com/kyverno/chainsaw v0.2.12\n")
	write(t, filepath.Join(root, "hack", "tool.sh"), "#!/bin/sh\necho 'go: github.com/kyverno/chainsaw@v0.2.12: reading https://proxy.golang.org: 404 Not Found' >&2\nexit 1\n")
	require.NoError(t, os.Chmod(filepath.Join(root, "hack", "tool.sh"), 0o700)) //nolint:gosec // G302: an executable for the test
	var progress strings.Builder
	_, err := Build(context.Background(), root, &progress)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "building Chainsaw v0.2.12 (the version hack/tools/chainsaw/go.mod pins)")
	assert.Contains(t, err.Error(), "404 Not Found")
	assert.Contains(t, progress.String(), "404 Not Found", "the build's output is shown as it happens")
}

func TestPinnedVersionIsTheWorkspacesPin(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	v, err := PinnedVersion(root)
	require.NoError(t, err)
	assert.Equal(t, "v0.2.12", v)
}
