package kind

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBuildScratchImage packages a tiny static program under the name and at the path a chart
// would use, and runs it.
func TestBuildScratchImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Docker image: not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nimport \"os\"\n\nfunc main() { _, _ = os.Stdout.WriteString(\"scratch ok\\n\") }\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/hello\n\ngo 1.26\n"), 0o600))
	bin := filepath.Join(t.TempDir(), "hello")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".") //nolint:gosec // G204: go build of the test's own program
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.Chmod(bin, 0o700), "the image runs it as user 65532 all the same") //nolint:gosec // G302: owner-only on purpose

	ref := fmt.Sprintf("gauntlet.local/scratch-test/hello:v%d", os.Getpid())
	t.Cleanup(func() { _, _ = docker(context.Background(), "image", "rm", ref) })
	require.NoError(t, BuildScratchImage(ctx, ref, bin, "/manager"))

	got, err := docker(ctx, "image", "inspect", "--format", `{{join .Config.Entrypoint " "}} {{.Config.User}}`, ref)
	require.NoError(t, err)
	assert.Equal(t, "/manager 65532:65532", strings.TrimSpace(got), "tagged exactly ref, the program where the chart's command looks")
	id, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", ref)
	require.NoError(t, err)

	run, err := docker(ctx, "run", "--rm", "--pull=never", ref)
	require.NoError(t, err)
	assert.Equal(t, "scratch ok\n", run, "the program runs, as user 65532")

	require.NoError(t, BuildScratchImage(ctx, ref, bin, "/manager"))
	again, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", ref)
	require.NoError(t, err)
	assert.Equal(t, id, again, "the same binary at the same path: the image is kept")
}

func TestBuildScratchImageRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "tool")
	require.NoError(t, os.WriteFile(bin, []byte("#!"), 0o600))
	for _, entrypoint := range []string{"manager", "/bin/../manager", "/", "/a b", `/"x"`} {
		err := BuildScratchImage(ctx, "example/tool:v1", bin, entrypoint)
		require.ErrorContains(t, err, "must be a clean absolute path", "%q", entrypoint)
	}
	require.EqualError(t, BuildScratchImage(ctx, "example/tool:v1", bin, ""),
		"building image example/tool:v1: "+bin+" is not an executable file")
	err := BuildScratchImage(ctx, "example/tool:v1", bin+"-missing", "")
	require.ErrorContains(t, err, "building image example/tool:v1: ")
	require.ErrorIs(t, err, os.ErrNotExist)
}
