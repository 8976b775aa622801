package conformance

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

func TestTheReportListsEveryStandIn(t *testing.T) {
	tg := &target.Target{Name: "demo", Source: target.Source{StandIns: []target.StandIn{
		{Image: "quay.io/brancz/kube-rbac-proxy:v0.18.0", Runs: "untilStopped", Replaces: "the metrics proxy sidecar", Why: "no image build here;\n  the checks read no metrics."},
		{Image: "alpine/k8s:1.30.0", Runs: "exitAtOnce", Replaces: "the CRD upgrade hook Job", Why: "the chart's crds/ installs them."},
	}}}
	out := t.TempDir()
	_, _, err := TargetRun{Target: tg, Out: out}.Report()
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(out, "report.md")) //nolint:gosec // G304: the test's own report
	require.NoError(t, err)
	assert.Contains(t, string(got), "## Stand-ins: images that cannot be built here, run as gauntlet's stand-in\n\n"+
		"- `quay.io/brancz/kube-rbac-proxy:v0.18.0` (untilStopped), in place of the metrics proxy sidecar: no image build here; the checks read no metrics.\n"+
		"- `alpine/k8s:1.30.0` (exitAtOnce), in place of the CRD upgrade hook Job: the chart's crds/ installs them.\n")
}
