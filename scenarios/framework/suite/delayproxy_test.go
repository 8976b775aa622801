package suite

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

func TestDelayProxyIsNotBuiltForAClusterThatRunsNoImageOfTheRun(t *testing.T) {
	cluster.Register("test-pulls-only", cluster.Provider{})
	img, why, err := delayProxy(t.Context(), "test-pulls-only")
	require.NoError(t, err)
	assert.Nil(t, img)
	assert.Equal(t, "provider test-pulls-only runs no image this run builds (its cluster pulls prebuilt images only), so the delaying proxy gauntlet-delay-proxy:dev cannot run there", why)
}

func TestDelayProxyOfAnUnknownProviderIsAnError(t *testing.T) {
	_, _, err := delayProxy(t.Context(), "no-such-provider")
	assert.ErrorContains(t, err, `unknown provider "no-such-provider"`)
}
