package kind

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFailedCreateLeavesNothing creates a cluster that fails after its node container exists
// (kind cannot render a kubeadm patch that is not YAML): the error says so, and no container of
// the cluster nor its state directory is left behind — also on a host not set up for kind,
// where the create fails at the host check instead.
func TestFailedCreateLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	name := fmt.Sprintf("gauntlet-failed-create-%d", os.Getpid()%100000)
	config := writeConfig(t, `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking: {disableDefaultCNI: true}
kubeadmConfigPatches:
- "kind: ClusterConfiguration\n  gauntlet-broken: [not yaml"
`)
	p := NewProvider()
	p.WithName(name).WithOpts(WithProgress(testWriter{t}))
	_, err := p.CreateWithConfig(ctx, config)
	require.Error(t, err, "a kubeadm patch that is not YAML cannot be applied")
	// On a host where kind's privileged nodes cannot start (not set up: `make kind-host-setup`),
	// the provider refuses before kind runs, naming the fix; elsewhere kind meets the patch.
	if strings.Contains(err.Error(), "privileged containers cannot start on this host") {
		assert.Contains(t, err.Error(), "make kind-host-setup", "the host check's error names the fix")
	} else {
		assert.Contains(t, err.Error(), fmt.Sprintf("kind could not create cluster %q", name), "the error names the cluster")
		assert.Contains(t, err.Error(), "failed to parse patches", "and kind's reason")
	}
	left, lerr := containersOf(name)
	require.NoError(t, lerr)
	assert.Empty(t, left, "containers of the failed cluster")
	_, serr := os.Stat(filepath.Dir(p.GetKubeconfig()))
	assert.True(t, os.IsNotExist(serr), "state directory %s of the failed cluster: %v", filepath.Dir(p.GetKubeconfig()), serr)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}
