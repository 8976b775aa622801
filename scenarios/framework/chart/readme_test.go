package chart_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// topologyOnlyValues are the values the multi-operator suite sets beyond the README's install,
// as dotted paths: lease timings (short, so failover scenarios repeat in seconds) and a DGDR
// default image per operator (so a scenario can tell which operator mutated an object). None is
// about how admission fails.
var topologyOnlyValues = []string{"namespaceRestriction.lease.", "dgdr.defaultImage"}

// readmeInstall is one `helm install` of the README's multi-operator block.
type readmeInstall struct {
	namespace string
	sets      map[string]string // --set path=value
}

// readmeTopologyInstalls reads the README's multi-operator install commands.
func readmeTopologyInstalls(t *testing.T) []readmeInstall {
	t.Helper()
	root, err := workspace.Root()
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, "README.md")) //nolint:gosec // G304: a file of this repository
	require.NoError(t, err)
	text := string(raw)
	start := strings.Index(text, "# the multi-operator topology")
	require.NotEqual(t, -1, start, "README.md has no block starting `# the multi-operator topology`")
	block, _, _ := strings.Cut(text[start:], "```")
	block = strings.ReplaceAll(block, "\\\n", " ")
	var out []readmeInstall
	install := regexp.MustCompile(`(?m)^helm install \S+ charts/dynamo-operator -n (\S+)(.*)$`)
	set := regexp.MustCompile(`--set (\S+?)=(\S+)`)
	for _, m := range install.FindAllStringSubmatch(block, -1) {
		in := readmeInstall{namespace: m[1], sets: map[string]string{}}
		for _, s := range set.FindAllStringSubmatch(m[2], -1) {
			in.sets[s[1]] = s[2]
		}
		out = append(out, in)
	}
	return out
}

// flatten turns nested values into dotted paths with their values as --set would write them.
func flatten(prefix string, v map[string]any, into map[string]string) {
	for k, val := range v {
		if m, ok := val.(map[string]any); ok {
			flatten(prefix+k+".", m, into)
			continue
		}
		into[prefix+k] = fmt.Sprint(val)
	}
}

// The multi-operator suite installs what a user who follows the README gets: the same values
// (the restricted release's failurePolicy included, which the chart defaults), plus only
// topologyOnlyValues. A value the suite set to make a scenario pass would hide from the
// scenarios a bug users have.
func TestTopologyInstallsWhatTheREADMESays(t *testing.T) {
	installs := readmeTopologyInstalls(t)
	require.Len(t, installs, 2, "README's multi-operator block: a cluster-wide and a restricted `helm install`")
	topo := release.NewTopology(testTimings)
	for i, r := range []*chart.Release{topo.ClusterWide, topo.Restricted} {
		readme := installs[i]
		got := map[string]string{}
		flatten("", r.Values, got)
		for path, want := range readme.sets {
			assert.Equal(t, want, got[path], "release %d (%s): the README sets %s", i+1, readme.namespace, path)
		}
	suiteOnly:
		for path, v := range got {
			if _, ok := readme.sets[path]; ok {
				continue
			}
			for _, allowed := range topologyOnlyValues {
				if strings.HasPrefix(path, allowed) {
					continue suiteOnly
				}
			}
			t.Errorf("release %d (%s): the suite sets %s=%s, which the README's install does not: users would not get it", i+1, readme.namespace, path, v)
		}
	}
}

// Another team's restricted operator is the restricted release in its own namespace: the same
// values, which it does not share with the topology's release.
func TestRestrictedInCopiesTheRestrictedRelease(t *testing.T) {
	topo := release.NewTopology(testTimings)
	other := topo.RestrictedIn("p5-term")
	assert.Equal(t, "p5-term", other.Namespace)
	assert.Equal(t, "p5-term", other.RestrictedNamespace())
	assert.NotEqual(t, topo.Restricted.ValidatingName(), other.ValidatingName(), "cluster-scoped names tell the two releases apart")
	assert.Equal(t, topo.Restricted.Values, other.Values)
	timings, err := chart.LeaseTimingsOf(other)
	require.NoError(t, err)
	assert.Equal(t, testTimings, timings)

	other.Values["namespaceRestriction"].(map[string]any)["enabled"] = false
	assert.Equal(t, release.TeamANamespace, topo.Restricted.RestrictedNamespace(), "changing the copy's values left the topology's release alone")
}
