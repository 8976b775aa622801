package main

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

func TestEveryProviderOfTheSuitesServesTheCommand(t *testing.T) {
	t.Setenv("GAUNTLET_PROVIDER", "")
	assert.Equal(t, []string{"existing", "kind", "local"}, cluster.Names(), "a provider a suite can choose is one gauntlet-cluster knows")
	for _, name := range cluster.Names() {
		clusters, got, err := parseProvider(flag.NewFlagSet("up", flag.ContinueOnError), []string{"--provider", name})
		require.NoError(t, err, "gauntlet-cluster up --provider %s", name)
		assert.NotNil(t, clusters, "gauntlet-cluster up --provider %s", name)
		assert.Equal(t, name, got)
	}
	_, got, err := parseProvider(flag.NewFlagSet("up", flag.ContinueOnError), nil)
	require.NoError(t, err)
	assert.Equal(t, "local", got, "the default provider")
	_, _, err = parseProvider(flag.NewFlagSet("up", flag.ContinueOnError), []string{"--provider", "minikube"})
	require.EqualError(t, err, `unknown provider "minikube" (want one of existing, kind, local)`)
}
