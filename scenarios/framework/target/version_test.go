package target

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gatekeeperTarget(t *testing.T) *Target {
	t.Helper()
	tg, err := Load(filepath.Join("..", "..", "targets", "gatekeeper"))
	require.NoError(t, err)
	return tg
}

func TestAtVersionBuildsTheSameDescriptionFromAnotherVersion(t *testing.T) {
	tg := gatekeeperTarget(t)
	at, err := tg.atVersion("v3.17.0")
	require.NoError(t, err)
	assert.Equal(t, "v3.17.0", at.Version())
	assert.Equal(t, tg.Source.Module.Path, at.Source.Module.Path)
	assert.Equal(t, "openpolicyagent/gatekeeper:v3.17.0", at.Source.Binaries[0].Image, "the image the v3.17.0 chart renders")
	assert.Equal(t, ".", at.Source.Binaries[0].Package)
	assert.Equal(t, tg.Probes, at.Probes)
	assert.Equal(t, tg.Setup, at.Setup)
	assert.Equal(t, tg.Dir(), at.Dir(), "setup and probe paths stay relative to the description")
	assert.Contains(t, at.Description, "v3.17.0")

	assert.Equal(t, "v3.23.1", tg.Version(), "the description itself is left as it was")
	assert.Equal(t, "openpolicyagent/gatekeeper:v3.23.1", tg.Source.Binaries[0].Image)
}

func TestAtVersionNeedsAModuleSource(t *testing.T) {
	tg := gatekeeperTarget(t)
	tg.Source.Module, tg.Source.Dir = nil, "operator"
	_, err := tg.atVersion("v3.17.0")
	require.ErrorContains(t, err, "is not built from a Go module version")
}

// TestAtVersionNamesTheVersionsTheProxyServes runs AtVersion against a go command that answers
// as the module proxy does when it serves v3.17.0 and v3.23.1 only.
func TestAtVersionNamesTheVersionsTheProxyServes(t *testing.T) {
	bin := t.TempDir()
	fake := `#!/bin/sh
case "$*" in
"mod download -json "*) echo '{"Error": "reading proxy: 404 Not Found"}'; exit 1 ;;
"list -m -versions -json "*) echo '{"Versions": ["v3.17.0", "v3.23.1"]}' ;;
*) echo "unexpected go $*" >&2; exit 2 ;;
esac
`
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte(fake), 0o700)) //nolint:gosec // G306: an executable
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	_, err := gatekeeperTarget(t).AtVersion(context.Background(), "v3.99.0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "target gatekeeper at v3.99.0")
	assert.Contains(t, err.Error(), "does not serve version v3.99.0 of github.com/open-policy-agent/gatekeeper/v3; it serves v3.17.0, v3.23.1")
}
