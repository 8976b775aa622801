package existing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

func TestSplitImage(t *testing.T) {
	for image, want := range map[string][2]string{
		"dynamo-operator:0.1.0":                 {"dynamo-operator", "0.1.0"},
		"registry.example:5000/team/op:v1.2-rc": {"registry.example:5000/team/op", "v1.2-rc"},
	} {
		repo, tag, ok := splitImage(image)
		assert.True(t, ok, image)
		assert.Equal(t, want, [2]string{repo, tag}, image)
	}
	for _, bad := range []string{"", "dynamo-operator", "registry.example:5000/team/op", "op:", ":tag"} {
		_, _, ok := splitImage(bad)
		assert.False(t, ok, "%q has no tag", bad)
	}
}

func TestKubeconfigPath(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	_, err := kubeconfigPath()
	require.ErrorContains(t, err, "KUBECONFIG is not set")
	missing := filepath.Join(t.TempDir(), "nowhere.yaml")
	t.Setenv("KUBECONFIG", missing)
	_, err = kubeconfigPath()
	require.ErrorContains(t, err, "KUBECONFIG names "+missing)
}

func TestUpNeedsTheKubeconfigASuiteNeeds(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	err := commandLine{}.Up(t.Context(), cluster.UpRequest{Name: "dev", Out: &strings.Builder{}})
	require.EqualError(t, err, "PROVIDER=existing needs KUBECONFIG=<file> naming the cluster to run on: KUBECONFIG is not set")
}

func TestUpRefusesTheFlagsOfACreatedCluster(t *testing.T) {
	for name, req := range map[string]cluster.UpRequest{
		"--config": {ConfigFile: "kind/cluster.yaml"}, "--no-node": {WithoutNode: true}, "--retain": {RetainOnFailure: true},
	} {
		req.Out = &strings.Builder{}
		err := commandLine{}.Up(t.Context(), req)
		require.ErrorContains(t, err, "the existing provider creates none", name)
	}
}

func TestDownDeletesNothing(t *testing.T) {
	var out strings.Builder
	require.NoError(t, commandLine{}.Down(t.Context(), "dev", &out))
	assert.Contains(t, out.String(), "The existing provider deletes no cluster")
}

func TestListNamesTheClusterByItsKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	names, err := commandLine{}.List()
	require.NoError(t, err)
	assert.Empty(t, names, "without KUBECONFIG there is no existing cluster")

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig.yaml")
	require.NoError(t, os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600))
	t.Setenv("KUBECONFIG", kubeconfig+string(filepath.ListSeparator)+"/elsewhere")
	names, err = commandLine{}.List()
	require.NoError(t, err)
	assert.Equal(t, []string{kubeconfig}, names, "the first file of KUBECONFIG, as a suite uses it")
}

func TestLoadImagesRefuses(t *testing.T) {
	err := commandLine{}.LoadImages(t.Context(), "dev", []string{"dynamo-operator:dev"}, &strings.Builder{})
	require.ErrorContains(t, err, "cannot copy images into a cluster's nodes")
}
