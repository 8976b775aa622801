package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestControlPlaneAssetsPrefersKubebuilderAssets(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etcd"), nil, 0o600)) // only its presence is checked
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	got, err := ControlPlaneAssets("etcd")
	require.NoError(t, err, "expected %s, saw %q, %v", dir, got, err)
	assert.Equal(t, dir, got, "expected %s, saw %q, %v", dir, got, err)
	_, err = ControlPlaneAssets("etcd", "kube-apiserver")
	require.ErrorContains(t, err, "control-plane binary kube-apiserver not found in "+dir, "expected the missing kube-apiserver named, saw %v", err)
}

func TestControlPlaneAssetsDefaultsToTheCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("GAUNTLET_CACHE", cache)
	want := filepath.Join(cache, "k8s", KubernetesVersion, "bin")
	got := ControlPlaneDir(KubernetesVersion)
	assert.Equal(t, want, got, "ControlPlaneDir: expected %s, saw %s", want, got)
	_, err := ControlPlaneAssets("etcd")
	require.ErrorContains(t, err, want, "expected an error naming %s, saw %v", want, err)
}

// Clusters run the default K8S_VERSION unless asked otherwise: the newest module under
// hack/tools/k8s, which the Makefile and hack scripts default to.
func TestKubernetesVersionIsTheDefault(t *testing.T) {
	root, err := Root()
	require.NoError(t, err)
	out, err := exec.Command(filepath.Join(root, "hack", "k8s-module.sh"), "--newest").Output() //nolint:gosec // G204: the repository's own script
	require.NoError(t, err, "hack/k8s-module.sh --newest")
	assert.Equal(t, KubernetesVersion, strings.TrimSpace(string(out)), "workspace.KubernetesVersion must be the default K8S_VERSION (newest under hack/tools/k8s)")
}

func TestEveryWorkspaceBuildsItsOwnOperator(t *testing.T) {
	main, scratch := OperatorDir("/work/main", "dev", false), OperatorDir("/work/main/_output/mutate/workspace/1", "dev", false)
	assert.NotEqual(t, main, scratch, "two workspaces building one version: a pod of one must never run the other's binary")
	assert.Equal(t, main, OperatorDir("/work/main", "dev", false), "one workspace and version: one directory, reused")
	assert.NotEqual(t, main, OperatorDir("/work/main", "v2", false))
	assert.Equal(t, main+"-cover", OperatorDir("/work/main", "dev", true))
	assert.Regexp(t, `^dynamo-operator-dev-[0-9a-f]{8}$`, main)
}
