package matrix

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// workflow is the part of a GitHub workflow the checks read.
type workflow struct {
	Jobs map[string]struct {
		Strategy struct {
			Matrix map[string]any `json:"matrix"`
		} `json:"strategy"`
		Steps []struct {
			Run string `json:"run"`
		} `json:"steps"`
	} `json:"jobs"`
}

func readWorkflow(t *testing.T, root, name string) workflow {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, ".github", "workflows", name)) //nolint:gosec // G304: a file of the workspace
	require.NoError(t, err)
	var w workflow
	require.NoError(t, yaml.Unmarshal(raw, &w), "parsing %s", name)
	return w
}

func listOf(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		out = append(out, strings.TrimSpace(toString(x)))
	}
	return out
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

// nightly reads nightly.yaml, and what the matrix supports.
func nightly(t *testing.T) (Supported, workflow) {
	t.Helper()
	root, err := workspace.Root()
	require.NoError(t, err)
	s, err := SupportedIn(root)
	require.NoError(t, err)
	return s, readWorkflow(t, root, "nightly.yaml")
}

// expectEveryVersionAndProvider fails unless the job called name runs once per supported
// Kubernetes version and provider.
func expectEveryVersionAndProvider(t *testing.T, s Supported, w workflow, name string) {
	t.Helper()
	job, ok := w.Jobs[name]
	require.True(t, ok, "nightly.yaml has a %s job", name)
	assert.Equal(t, s.Versions, listOf(job.Strategy.Matrix["version"]), "nightly.yaml's %s job, matrix.version: every Kubernetes version under hack/tools/k8s", name)
	assert.ElementsMatch(t, s.Providers, listOf(job.Strategy.Matrix["provider"]), "nightly.yaml's %s job, matrix.provider", name)
}

// The nightly workflow runs every supported Kubernetes version, both providers and every suite:
// a version added under hack/tools/k8s or a suite added under e2e/ that the nightly misses
// fails here.
func TestNightlyWorkflowCoversTheMatrix(t *testing.T) {
	s, w := nightly(t)
	expectEveryVersionAndProvider(t, s, w, "e2e")
	e2e := w.Jobs["e2e"]

	suitesArg := regexp.MustCompile(`make e2e-matrix .*SUITES="([^"]*)"`)
	var suites []string
	for _, st := range e2e.Steps {
		if m := suitesArg.FindStringSubmatch(st.Run); m != nil {
			suites = strings.Fields(m[1])
		}
	}
	assert.Equal(t, s.Suites, suites, "nightly.yaml's make e2e-matrix SUITES: every suite under e2e/")
}

// The nightly runs autocert and multioperator contended (STRESS=2) on the newest supported
// version: a version dropped from hack/tools/k8s or a suite renamed fails here.
func TestNightlyWorkflowRunsSuitesUnderStress(t *testing.T) {
	s, w := nightly(t)
	job, ok := w.Jobs["e2e-stress"]
	require.True(t, ok, "nightly.yaml has an e2e-stress job")
	run := regexp.MustCompile(`make e2e-matrix VERSIONS="([^"]*)" PROVIDERS="([^"]*)" SUITES="([^"]*)" STRESS=([0-9]+)`)
	var m []string
	for _, st := range job.Steps {
		if found := run.FindStringSubmatch(st.Run); found != nil {
			m = found
		}
	}
	require.NotNil(t, m, "nightly.yaml's e2e-stress job runs `make e2e-matrix VERSIONS=… PROVIDERS=… SUITES=… STRESS=N`")
	assert.Equal(t, s.Versions[len(s.Versions)-1], m[1], "e2e-stress runs the newest Kubernetes version under hack/tools/k8s")
	assert.Equal(t, "local", m[2])
	assert.Equal(t, []string{"autocert", "multioperator"}, strings.Fields(m[3]))
	assert.Subset(t, s.Suites, strings.Fields(m[3]), "e2e-stress's suites are suites under e2e/")
	assert.Equal(t, "2", m[4])
}

// The nightly runs the webhook contract against every target on every supported version and
// provider, and merges the runs into one grid that fails on a changed cell.
func TestNightlyWorkflowRunsTheConformanceGrid(t *testing.T) {
	s, w := nightly(t)
	expectEveryVersionAndProvider(t, s, w, "conformance")
	runsOf := func(name string) string {
		var runs []string
		for _, st := range w.Jobs[name].Steps {
			runs = append(runs, st.Run)
		}
		return strings.Join(runs, "\n")
	}
	assert.Contains(t, runsOf("conformance"), `make e2e-conformance TARGET=all PROVIDER="${{ matrix.provider }}" K8S_VERSION="${{ matrix.version }}"`)
	assert.Contains(t, runsOf("conformance-grid"), `make e2e-conformance-merge PARTS=`)
}

// CI runs the README's test command.
func TestCIWorkflowRunsMakeTest(t *testing.T) {
	root, err := workspace.Root()
	require.NoError(t, err)
	w := readWorkflow(t, root, "ci.yaml")
	var runs []string
	for _, job := range w.Jobs {
		for _, st := range job.Steps {
			runs = append(runs, st.Run)
		}
	}
	assert.Contains(t, runs, "make test")
}
