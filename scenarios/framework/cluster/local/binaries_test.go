package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// TestTheOperatorImageIsWhatItsDockerfileBuilds: the node must know the operator's image as kind
// runs it, its one program at its entrypoint, so that a command or exec probe naming anything
// else fails on local as it does there.
func TestTheOperatorImageIsWhatItsDockerfileBuilds(t *testing.T) {
	root, err := workspace.Root()
	require.NoError(t, err)
	dockerfile := filepath.Join(root, "operator", "Dockerfile")
	raw, err := os.ReadFile(dockerfile) //nolint:gosec // G304: the repository's own Dockerfile
	require.NoError(t, err)
	var copied []string
	var entrypoint string
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "COPY":
			copied = append(copied, fields[len(fields)-1])
		case fields[0] == "ENTRYPOINT":
			entrypoint = strings.TrimSpace(strings.TrimPrefix(line, "ENTRYPOINT"))
		}
	}
	assert.Equal(t, []string{operatorEntrypoint}, copied, "%s copies these paths into the image; the node knows it as holding %s alone", dockerfile, operatorEntrypoint)
	assert.Equal(t, `["`+operatorEntrypoint+`"]`, entrypoint, "%s's ENTRYPOINT", dockerfile)
	img := operatorImage("/host/dynamo-operator")
	require.NoError(t, img.Validate())
	assert.True(t, img.Described(), "an image known by its binary alone runs the host's programs for exec probes")
}
