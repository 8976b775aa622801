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

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
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
	require.NoError(t, BuildScratchImage(ctx, ref, cluster.Image{Binary: bin, Entrypoint: "/manager"}))

	got, err := docker(ctx, "image", "inspect", "--format", `{{join .Config.Entrypoint " "}} {{.Config.User}}`, ref)
	require.NoError(t, err)
	assert.Equal(t, "/manager 65532:65532", strings.TrimSpace(got), "tagged exactly ref, the program where the chart's command looks")
	id, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", ref)
	require.NoError(t, err)

	run, err := docker(ctx, "run", "--rm", "--pull=never", ref)
	require.NoError(t, err)
	assert.Equal(t, "scratch ok\n", run, "the program runs, as user 65532")

	require.NoError(t, BuildScratchImage(ctx, ref, cluster.Image{Binary: bin, Entrypoint: "/manager"}))
	again, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", ref)
	require.NoError(t, err)
	assert.Equal(t, id, again, "the same binary at the same path: the image is kept")
}

func TestBuildScratchImageRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "tool")
	require.NoError(t, os.WriteFile(bin, []byte("#!"), 0o600))
	for _, entrypoint := range []string{"manager", "/bin/../manager", "/", "/a b", `/"x"`, ""} {
		err := BuildScratchImage(ctx, "example/tool:v1", cluster.Image{Binary: bin, Entrypoint: entrypoint})
		require.ErrorContains(t, err, "must be a clean absolute path", "%q", entrypoint)
	}
	require.EqualError(t, BuildScratchImage(ctx, "example/tool:v1", cluster.Image{Binary: bin, Entrypoint: "/tool"}),
		"building image example/tool:v1: "+bin+" is not an executable file")
	err := BuildScratchImage(ctx, "example/tool:v1", cluster.Image{Binary: bin + "-missing", Entrypoint: "/tool"})
	require.ErrorContains(t, err, "building image example/tool:v1: ")
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, os.Chmod(bin, 0o700)) //nolint:gosec // G302: owner-only on purpose
	err = BuildScratchImage(ctx, "example/tool:v1", cluster.Image{Binary: bin, Entrypoint: "/tool", Files: map[string]string{"/opt/crds": bin + "-none"}})
	require.ErrorIs(t, err, os.ErrNotExist, "a file the image carries that does not exist")
}

// TestTheScratchImagesContextHoldsEveryProgramAndFile: what Docker is given to build, without
// Docker — each program and file at the path the image holds it, readable by user 65532.
func TestTheScratchImagesContextHoldsEveryProgramAndFile(t *testing.T) {
	src := t.TempDir()
	write := func(name, content string, perm os.FileMode) string {
		p := filepath.Join(src, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(content), perm))
		return p
	}
	manager := write("manager", "manager program", 0o700)
	crdApply := write("crd-apply", "crd-apply program", 0o700)
	write("crds/a.yaml", "kind: CustomResourceDefinition", 0o600)
	write("crds/nested/b.yaml", "kind: CustomResourceDefinition", 0o600)
	config := write("config.yaml", "key: value", 0o600)
	img := cluster.Image{
		Binary: manager, Entrypoint: "/manager",
		Programs: map[string]string{"/usr/local/bin/crd-apply": crdApply},
		Files:    map[string]string{"/opt/crds": filepath.Join(src, "crds"), "/etc/op/config.yaml": config},
		Env:      map[string]string{"GAUNTLET_STAND_IN": "untilStopped"},
	}
	ctx := t.TempDir()
	sum, err := writeScratchContext(ctx, img)
	require.NoError(t, err)

	dockerfile, err := os.ReadFile(filepath.Join(ctx, "Dockerfile")) //nolint:gosec // G304: the test's own build context
	require.NoError(t, err)
	assert.Equal(t, `FROM scratch
COPY programs/0 /manager
COPY programs/1 /usr/local/bin/crd-apply
COPY files/2 /etc/op/config.yaml
COPY files/3 /opt/crds
ENV GAUNTLET_STAND_IN="untilStopped"
USER 65532:65532
ENTRYPOINT ["/manager"]
LABEL dev.gauntlet.scratch-image="`+sum+`"
`, string(dockerfile))
	for file, want := range map[string]struct {
		content string
		perm    os.FileMode
	}{
		"programs/0":            {"manager program", 0o755},
		"programs/1":            {"crd-apply program", 0o755},
		"files/2":               {"key: value", 0o644},
		"files/3/a.yaml":        {"kind: CustomResourceDefinition", 0o644},
		"files/3/nested/b.yaml": {"kind: CustomResourceDefinition", 0o644},
	} {
		p := filepath.Join(ctx, file)
		got, err := os.ReadFile(p) //nolint:gosec // G304: the test's own build context
		if assert.NoError(t, err, "%s in the build context", file) {
			assert.Equal(t, want.content, string(got), file)
			info, _ := os.Stat(p)
			assert.Equal(t, want.perm, info.Mode().Perm(), "%s: readable by the image's user 65532", file)
		}
	}

	again := t.TempDir()
	sumAgain, err := writeScratchContext(again, img)
	require.NoError(t, err)
	assert.Equal(t, sum, sumAgain, "the same programs and files: the same label, so the image is kept")
	write("crds/a.yaml", "kind: Changed", 0o600)
	changed, err := writeScratchContext(t.TempDir(), img)
	require.NoError(t, err)
	assert.NotEqual(t, sum, changed, "a carried file changed: another label, so the image is rebuilt")
}
