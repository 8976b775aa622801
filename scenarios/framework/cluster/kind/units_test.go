package kind

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "cluster.yaml")
	require.NoError(t, os.WriteFile(f, []byte(body), 0o600))
	return f
}

// workspaceFile is the path of rel (slash-separated, relative to the workspace root), found from
// the root rather than from this package's depth, which moves when packages move.
func workspaceFile(t *testing.T, rel string) string {
	t.Helper()
	root, err := workspace.Root()
	require.NoError(t, err)
	return filepath.Join(root, filepath.FromSlash(rel))
}

func TestLoadClusterConfig(t *testing.T) {
	c, err := loadClusterConfig(writeConfig(t, "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking: {disableDefaultCNI: true}\n"))
	require.NoError(t, err)
	assert.True(t, c.Networking.DisableDefaultCNI)
	assert.Equal(t, "10.96.0.0/16", c.Networking.ServiceSubnet, "defaults are filled: the network fence needs the Service range")
	assert.Equal(t, "10.244.0.0/16", c.Networking.PodSubnet)

	_, err = loadClusterConfig(writeConfig(t, "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworkin: {}\n"))
	require.ErrorContains(t, err, `unknown field "networkin"`, "a typo must not be ignored")

	_, err = loadClusterConfig(writeConfig(t, "kind: LocalCluster\napiVersion: gauntlet.dev/v1\n"))
	require.ErrorContains(t, err, "want kind: Cluster, apiVersion: kind.x-k8s.io/v1alpha4")

	_, err = loadClusterConfig(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorContains(t, err, "reading kind cluster configuration")
}

func TestDefaultConfigIsValid(t *testing.T) {
	c, err := loadClusterConfig(workspaceFile(t, DefaultConfigFile))
	require.NoError(t, err)
	assert.Len(t, c.Nodes, 1)
	assert.Empty(t, c.KubeadmConfigPatches, "host quirk patches belong to the preflight, not to kind/cluster.yaml")
	assert.Empty(t, c.ContainerdConfigPatches)
}

func TestIPv4Ranges(t *testing.T) {
	assert.Equal(t, []string{"10.96.0.0/16", "10.244.0.0/16"}, ipv4Ranges("10.96.0.0/16, fd00:10:96::/112,10.244.0.0/16,"))
}

func TestSocatError(t *testing.T) {
	lines := []string{
		"2026/11/24 16:13:54 socat[1405] N opening connection to AF=2 10.96.60.109:443",
		"2026/11/24 16:13:54 socat[1405] W connect(5, AF=2 10.96.60.109:443, 16): Connection refused",
		"2026/11/24 16:13:54 socat[1405] E TCP:10.96.60.109:443: Connection refused",
	}
	assert.Equal(t, "TCP:10.96.60.109:443: Connection refused", socatError(lines, nil))
	assert.Equal(t, "socat exited before connecting", socatError(nil, nil))
}

// A refused dial hung for ever: socat exited, but `docker exec -i` waited for its stdin to end.
// Its lines, as socat -d -d wrote them in a kind node (2026-11-30), must end the dial.
func TestSocatEndsOnItsErrorOrExitBeforeConnecting(t *testing.T) {
	for _, line := range []string{
		"2026/11/30 10:39:14 socat[5978] E TCP:10.96.0.1:1: Connection refused",
		"2026/11/30 10:39:14 socat[5978] N exit(1)",
	} {
		assert.True(t, socatEnds(line), line)
	}
	for _, line := range []string{
		"2026/11/30 10:39:14 socat[5978] N opening connection to AF=2 10.96.0.1:1",
		"2026/11/30 10:39:14 socat[5978] W connect(5, AF=2 10.96.0.1:1, 16): Connection refused",
	} {
		assert.False(t, socatEnds(line), line)
	}
}

func TestContainerdID(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "op", Namespace: "team-a"}, Status: corev1.PodStatus{
		ContainerStatuses: []corev1.ContainerStatus{{Name: "operator", ContainerID: "containerd://abc123"}, {Name: "side", ContainerID: "process://42"}},
	}}
	id, err := containerdID(pod, "operator")
	require.NoError(t, err)
	assert.Equal(t, "abc123", id)
	_, err = containerdID(pod, "side")
	require.ErrorContains(t, err, `containerID "process://42" is not a containerd one`)
	_, err = containerdID(pod, "missing")
	require.ErrorContains(t, err, "has no status for container missing")
}

func TestWithPodRange(t *testing.T) {
	raw, err := os.ReadFile(workspaceFile(t, "kind/node-image/10-ptp.conflist"))
	require.NoError(t, err)
	out, err := withPodRange(raw, "10.244.1.0/24")
	require.NoError(t, err)
	assert.Contains(t, string(out), `"subnet": "10.244.1.0/24"`)
	assert.NotContains(t, string(out), "10.244.0.0/24", "the first node's range is replaced, not added")
	assert.Contains(t, string(out), `"portmap"`, "the other plugins stay")

	_, err = withPodRange([]byte(`{"plugins":[{"type":"bridge"}]}`), "10.244.1.0/24")
	require.ErrorContains(t, err, "no host-local IPAM")
}

func TestWorkersConfigIsValid(t *testing.T) {
	c, err := loadClusterConfig(workspaceFile(t, "kind/cluster-workers.yaml"))
	require.NoError(t, err)
	assert.Len(t, c.Nodes, 2)
}

func TestHostPreparationBuildsTheNodeImageUnlessOneIsNamed(t *testing.T) {
	t.Setenv(NodeImageEnv, "")
	assert.Equal(t, [][]string{{"hack/kind-host.sh", "check"}, {"hack/kind-node-image.sh"}}, hostPreparation())
	t.Setenv(NodeImageEnv, "kindest/node:v1.37.2")
	assert.Equal(t, [][]string{{"hack/kind-host.sh", "check"}}, hostPreparation(), "a named node image is used as it is")
}
