package cluster_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/cluster"
	_ "github.com/gauntlet-dev/gauntlet/scenarios/cluster/providers"
)

func TestEveryProviderRegisters(t *testing.T) {
	assert.Equal(t, []string{"existing", "kind", "local"}, cluster.Names())
	for _, name := range cluster.Names() {
		_, err := cluster.Lookup(name)
		require.NoError(t, err, name)
	}
	_, err := cluster.Lookup("minikube")
	require.EqualError(t, err, `unknown provider "minikube" (want one of existing, kind, local)`)
	assert.Panics(t, func() { cluster.Register("kind", nil) }, "a name registered twice is a programming error")
}
