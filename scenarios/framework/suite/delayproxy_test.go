package suite

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

func TestDelayProxyIsNotBuiltForAClusterThatRunsNoImageOfTheRun(t *testing.T) {
	img, why, err := delayProxy(t.Context(), "pulls-only", cluster.Provider{})
	require.NoError(t, err)
	assert.Nil(t, img)
	assert.Equal(t, "provider pulls-only runs no image this run builds (its cluster pulls prebuilt images only), so the delaying proxy gauntlet-delay-proxy:dev cannot run there", why)
}

// A FROM scratch image holds its entrypoint at a path (kind refuses an image without one: every
// suite installing a target failed its setup there).
func TestDelayProxyImageHoldsTheProxyAtItsEntrypoint(t *testing.T) {
	img, why, err := delayProxy(t.Context(), "runs-images", cluster.Provider{RunsImages: true})
	require.NoError(t, err)
	require.Empty(t, why)
	assert.Equal(t, "/gauntlet-delay-proxy", img.Entrypoint)
	assert.FileExists(t, img.Binary)
}
