package gomodule

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stringer is a small main package of a module the proxy serves: the build downloads a handful
// of modules and takes seconds.
const (
	toolsModule  = "golang.org/x/tools"
	toolsVersion = "v0.47.0"
)

// TestResolveAndBuildARealModule downloads golang.org/x/tools from the Go module proxy, builds
// cmd/stringer into a fresh cache and runs it.
func TestResolveAndBuildARealModule(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads from the Go module proxy and builds: not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Setenv("GAUNTLET_CACHE", t.TempDir())

	dir, err := Resolve(ctx, toolsModule, toolsVersion)
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(dir, "cmd", "stringer", "stringer.go"))

	var progress bytes.Buffer
	bin, err := Build(ctx, toolsModule, toolsVersion, "cmd/stringer", &progress)
	require.NoError(t, err, "%s", progress.String())
	t.Log(strings.TrimSpace(progress.String()))
	want, _ := BinaryPath(toolsModule, toolsVersion, "cmd/stringer")
	assert.Equal(t, want, bin)

	info, err := buildinfo.ReadFile(bin)
	require.NoError(t, err)
	assert.Equal(t, toolsModule, info.Main.Path, "built from the module, not from the workspace")
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	assert.Equal(t, "0", settings["CGO_ENABLED"], "static: an image FROM scratch can run it")
	assert.Equal(t, "true", settings["-trimpath"])

	out, _ := exec.CommandContext(ctx, bin, "-help").CombinedOutput() //nolint:gosec // G204: the binary this test built
	assert.Contains(t, string(out), "Usage of stringer:", "the binary runs")

	progress.Reset()
	again, err := Build(ctx, toolsModule, toolsVersion, "cmd/stringer", &progress)
	require.NoError(t, err)
	assert.Equal(t, bin, again)
	assert.Empty(t, progress.String(), "the second Build finds the binary in the cache")
}

// TestResolveAgainstTheRealProxy checks the errors with the Go module proxy's real answers.
func TestResolveAgainstTheRealProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("asks the Go module proxy: not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	_, err := Resolve(ctx, toolsModule, "v0.999.0")
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), "the Go module proxy does not serve version v0.999.0 of golang.org/x/tools; it serves ")
	assert.Regexp(t, `v0\.\d+\.\d+ \(and \d+ older\)$`, err.Error(), "the newest versions, the count of the others")

	const unknown = "github.com/gauntlet-dev/no-such-module"
	_, err = Resolve(ctx, unknown, "v1.0.0")
	t.Log(err)
	require.ErrorContains(t, err, "the Go module proxy does not know module "+unknown)
}

// TestBuildGatekeeper builds OPA Gatekeeper's manager into gauntlet's cache, where targets find
// it: minutes on 2 cores, so only when GAUNTLET_BUILD_GATEKEEPER=1.
func TestBuildGatekeeper(t *testing.T) {
	if os.Getenv("GAUNTLET_BUILD_GATEKEEPER") != "1" {
		t.Skip("set GAUNTLET_BUILD_GATEKEEPER=1 to build Gatekeeper (minutes)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	bin, err := Build(ctx, gatekeeper, "v3.23.1", ".", testWriter{t})
	require.NoError(t, err)
	out, _ := exec.CommandContext(ctx, bin, "--help").CombinedOutput() //nolint:gosec // G204: the binary this test built
	assert.Contains(t, string(out), "  -cert-dir string", "Gatekeeper's manager prints its flags")
	st, err := os.Stat(bin)
	require.NoError(t, err)
	t.Logf("%s: %d MB", bin, st.Size()>>20)

	dir, err := Resolve(ctx, gatekeeper, "v3.23.1")
	require.NoError(t, err)
	chart, err := ChartDir(dir, "charts/gatekeeper")
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(chart, "values.yaml"))
	_, err = ChartDir(dir, "charts/gatekeepr")
	require.ErrorContains(t, err, "it has these charts: charts/gatekeeper")
	t.Log(err)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
