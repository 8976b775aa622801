package existing

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitImage(t *testing.T) {
	for image, want := range map[string][2]string{
		"dynamo-operator:0.1.0":                 {"dynamo-operator", "0.1.0"},
		"registry.example:5000/team/op:v1.2-rc": {"registry.example:5000/team/op", "v1.2-rc"},
	} {
		repo, tag, ok := splitImage(image)
		assert.True(t, ok, image)
		assert.Equal(t, want, [2]string{repo, tag}, image)
	}
	for _, bad := range []string{"", "dynamo-operator", "registry.example:5000/team/op", "op:", ":tag"} {
		_, _, ok := splitImage(bad)
		assert.False(t, ok, "%q has no tag", bad)
	}
}

func TestKubeconfigPath(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	_, err := kubeconfigPath()
	require.ErrorContains(t, err, "KUBECONFIG is not set")
	missing := filepath.Join(t.TempDir(), "nowhere.yaml")
	t.Setenv("KUBECONFIG", missing)
	_, err = kubeconfigPath()
	require.ErrorContains(t, err, "KUBECONFIG names "+missing)
}
