package cluster_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers"
)

func TestEveryProviderRegisters(t *testing.T) {
	assert.Equal(t, []string{"existing", "kind", "local"}, cluster.Names())
	for _, name := range cluster.Names() {
		p, err := cluster.Lookup(name)
		require.NoError(t, err, name)
		assert.NotNil(t, p.Start, "%s: a suite needs Start", name)
		assert.NotNil(t, p.Clusters, "%s: gauntlet-cluster needs Clusters", name)
	}
	_, err := cluster.Lookup("minikube")
	require.EqualError(t, err, `unknown provider "minikube" (want one of existing, kind, local)`)
	assert.Panics(t, func() { cluster.Register("kind", cluster.Provider{}) }, "a name registered twice is a programming error")
}

func TestTheDefaultProviderIsRegistered(t *testing.T) {
	_, err := cluster.Lookup(cluster.DefaultProvider)
	require.NoError(t, err)
}

func TestOnlyLocalCollectsOperatorCoverage(t *testing.T) {
	assert.Equal(t, []string{"local"}, cluster.NamesWith(func(p cluster.Provider) bool { return p.OperatorCoverage }))
}

func TestOnlyKindPreparesTheHost(t *testing.T) {
	assert.Equal(t, []string{"kind"}, cluster.NamesWith(func(p cluster.Provider) bool { return p.HostPreparation != nil }))
}
