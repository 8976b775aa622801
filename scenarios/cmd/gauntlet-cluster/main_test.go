package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/cluster"
)

func TestEveryProviderOfTheSuitesServesTheCommand(t *testing.T) {
	for _, name := range []string{"local", "kind", "existing"} {
		clusters, err := clustersOf(name)
		require.NoError(t, err, "gauntlet-cluster --provider=%s", name)
		assert.NotNil(t, clusters, "gauntlet-cluster --provider=%s", name)
	}
	assert.Equal(t, []string{"existing", "kind", "local"}, cluster.Names(), "a provider a suite can choose is one gauntlet-cluster knows")
	_, err := clustersOf("minikube")
	require.EqualError(t, err, `unknown provider "minikube" (want one of existing, kind, local)`)
}
