package existing

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/cluster"
)

func TestUpNeedsTheKubeconfigASuiteNeeds(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	err := commandLine{}.Up(context.Background(), cluster.UpRequest{Name: "dev", Out: &bytes.Buffer{}})
	require.EqualError(t, err, "PROVIDER=existing needs KUBECONFIG=<file> naming the cluster to run on: KUBECONFIG is not set")
}

func TestUpRefusesTheFlagsOfACreatedCluster(t *testing.T) {
	for name, req := range map[string]cluster.UpRequest{
		"--config": {ConfigFile: "kind/cluster.yaml"}, "--no-node": {WithoutNode: true}, "--retain": {RetainOnFailure: true},
	} {
		req.Out = &bytes.Buffer{}
		err := commandLine{}.Up(context.Background(), req)
		require.ErrorContains(t, err, "the existing provider creates none", name)
	}
}

func TestDownDeletesNothing(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, commandLine{}.Down(context.Background(), "dev", &out))
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
	err := commandLine{}.LoadImages(context.Background(), "dev", []string{"dynamo-operator:dev"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "cannot copy images into a cluster's nodes")
}
