package cluster_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

func TestCreateOrReuse(t *testing.T) {
	var did []string
	req := cluster.Request{Name: "e2e-x", Step: func(title string, fn func() error) error {
		did = append(did, "step "+title)
		return fn()
	}}
	create := func() error { did = append(did, "create"); return nil }
	reuse := func() error { did = append(did, "reuse"); return nil }

	require.NoError(t, req.CreateOrReuse("local", "make cluster-down CLUSTER=e2e-x", false, create, reuse))
	assert.Equal(t, []string{"create"}, did, "no cluster of that name: created")

	did = nil
	err := req.CreateOrReuse("local", "make cluster-down CLUSTER=e2e-x", true, create, reuse)
	require.EqualError(t, err, `local cluster "e2e-x" already exists; delete it (make cluster-down CLUSTER=e2e-x) or keep and reuse it with KEEP_CLUSTER=1`)
	assert.Empty(t, did, "an existing cluster is not touched without Keep")

	req.Keep = true
	require.NoError(t, req.CreateOrReuse("local", "make cluster-down CLUSTER=e2e-x", true, create, reuse))
	assert.Equal(t, []string{"step Reusing kept local cluster e2e-x", "reuse"}, did, "kept and reused as a step")

	err = req.CreateOrReuse("kind", "", false, func() error { return errors.New("boom") }, reuse)
	require.EqualError(t, err, "creating kind cluster e2e-x: boom")
}
