package kind

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A check that still samples memory while an interrupted suite deletes its cluster met a nil
// REST config here and panicked, losing the suite's summary.
func TestNodeStatsOfADeletedClusterIsAnError(t *testing.T) {
	t.Setenv("GAUNTLET_CACHE", t.TempDir()) // no kubeconfig: the cluster is gone
	_, err := backend{p: &Provider{name: "w-gone"}}.NodeStats(context.Background(), "w-gone-control-plane")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kind cluster w-gone's kubeconfig")
}
