package procnode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestMountpoints(t *testing.T, registry, instance string) *mountpoints {
	t.Helper()
	m, err := newMountpoints(registry, instance)
	require.NoError(t, err)
	return m
}

func mustEnsure(t *testing.T, m *mountpoints, path string, file bool) []string {
	t.Helper()
	held, err := m.ensure(path, file)
	require.NoError(t, err, "creating mount target %s", path)
	return held
}

func assertExists(t *testing.T, path string, want bool, why string) {
	t.Helper()
	_, err := os.Lstat(path)
	require.Equal(t, want, err == nil, "%s: exists (Lstat: %v)", why, err)
}

func TestMountpointsRemoveOnlyWhatTheyCreated(t *testing.T) {
	root := t.TempDir()
	existing := filepath.Join(root, "etc")
	require.NoError(t, os.Mkdir(existing, 0o750))
	m := newTestMountpoints(t, t.TempDir(), "node")
	a := mustEnsure(t, m, filepath.Join(existing, "op", "certs"), false)
	b := mustEnsure(t, m, filepath.Join(existing, "op", "config.yaml"), true)
	info, err := os.Stat(filepath.Join(existing, "op", "config.yaml"))
	require.NoError(t, err, "file mount target")
	require.False(t, info.IsDir(), "file mount target created as a directory")
	m.release(a)
	assertExists(t, filepath.Join(existing, "op", "certs"), false, "released mount dir")
	assertExists(t, filepath.Join(existing, "op"), true, "parent still held by another mount")
	m.release(b)
	assertExists(t, filepath.Join(existing, "op"), false, "created parent nobody holds")
	assertExists(t, existing, true, "pre-existing directory")
}

func TestMountpointsKeepDirectoriesSomebodyFilled(t *testing.T) {
	root := t.TempDir()
	m := newTestMountpoints(t, t.TempDir(), "node")
	held := mustEnsure(t, m, filepath.Join(root, "work"), false)
	require.NoError(t, os.WriteFile(filepath.Join(root, "work", "out.txt"), []byte("x"), 0o600))
	m.release(held)
	assertExists(t, filepath.Join(root, "work", "out.txt"), true, "file in a released directory")
}

// Two clusters on one host mount their operators' certificates at the same path. Removing
// the path while the other node's pod has a volume mounted there would detach that mount,
// so the path stays until the last node lets go.
func TestMountpointsSharedByNodesStayUntilTheLastReleases(t *testing.T) {
	root, registry := t.TempDir(), t.TempDir()
	target := filepath.Join(root, "k8s-webhook-server", "serving-certs")
	first := newTestMountpoints(t, registry, "cluster-a")
	second := newTestMountpoints(t, registry, "cluster-b")
	heldByFirst := mustEnsure(t, first, target, false)
	heldBySecond := mustEnsure(t, second, target, false)
	first.release(heldByFirst)
	assertExists(t, target, true, "mount target the second node's pod still uses, after the first node released it")
	second.release(heldBySecond)
	assertExists(t, filepath.Join(root, "k8s-webhook-server"), false, "mount targets once both nodes released them")
}

func TestMountpointsOfAKilledNodeAreRemovedByTheNext(t *testing.T) {
	root, registry := t.TempDir(), t.TempDir()
	// A holder whose process is gone: pid beyond any pid_max.
	killed := &mountpoints{dir: registry, holder: "2147483647:1:killed"}
	mustEnsure(t, killed, filepath.Join(root, "a", "b"), false)
	assertExists(t, filepath.Join(root, "a", "b"), true, "mount target while its node runs")

	next := newTestMountpoints(t, registry, "next")
	require.NoError(t, next.removeOrphans())
	assertExists(t, filepath.Join(root, "a"), false, "a killed node's mount targets after the next node started")
}

// The registry lives in /run; once no node records anything it is removed, parent included,
// so the host looks as it did before the first node.
func TestMountpointsRegistryIsRemovedWithTheLastTarget(t *testing.T) {
	root := t.TempDir()
	registry := filepath.Join(t.TempDir(), "gauntlet-node", "mountpoints")
	m := newTestMountpoints(t, registry, "node")
	held := mustEnsure(t, m, filepath.Join(root, "certs"), false)
	assertExists(t, filepath.Join(registry, "state.json"), true, "registry while a target is held")
	m.release(held)
	assertExists(t, filepath.Dir(registry), false, "registry directory once nothing is held")
	// The next node creates it again.
	mustEnsure(t, m, filepath.Join(root, "certs"), false)
	assertExists(t, filepath.Join(registry, "state.json"), true, "registry created again by the next hold")
}

func TestHostLeftoversNameAKilledNodesMountTargets(t *testing.T) {
	root := t.TempDir()
	registry := filepath.Join(t.TempDir(), "mountpoints")
	killed := &mountpoints{dir: registry, holder: "2147483647:1:gauntlet-a"}
	mustEnsure(t, killed, filepath.Join(root, "certs"), false)

	left := mountTargetLeftovers(registry, "gauntlet-a")
	require.Len(t, left, 1, "the one target the node created")
	assert.Contains(t, left[0], filepath.Join(root, "certs"))
	assert.Empty(t, mountTargetLeftovers(registry, "gauntlet-b"), "another node's leftovers")

	require.NoError(t, newTestMountpoints(t, registry, "cleanup").removeOrphans())
	assert.Empty(t, mountTargetLeftovers(registry, "gauntlet-a"), "after the orphans were removed")
	assertExists(t, registry, false, "registry after its last target went")
}
