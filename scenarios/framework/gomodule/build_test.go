package gomodule

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCacheDirUsesTheModuleCacheEscaping(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("GAUNTLET_CACHE", cache)
	dir, err := CacheDir("github.com/BurntSushi/toml", "v1.6.0-RC1")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(cache, "targets", "github.com", "!burnt!sushi", "toml@v1.6.0-!r!c1"), dir,
		"uppercase letters become ! and their lowercase, as in GOMODCACHE")

	_, err = CacheDir("github.com/a b/c", "v1.0.0")
	require.ErrorContains(t, err, "module github.com/a b/c@v1.0.0")
}

func TestBinaryPathNamesTheProgramAsGoBuildDoes(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("GAUNTLET_CACHE", cache)
	for _, c := range []struct{ module, pkg, want string }{
		{gatekeeper, ".", "github.com/open-policy-agent/gatekeeper/v3@v3.23.1/gatekeeper"},
		{gatekeeper, "cmd/gator", "github.com/open-policy-agent/gatekeeper/v3@v3.23.1/gator"},
		{gatekeeper, "./cmd/gator/", "github.com/open-policy-agent/gatekeeper/v3@v3.23.1/gator"},
		{"golang.org/x/tools", "cmd/stringer", "golang.org/x/tools@v3.23.1/stringer"},
		{"example.com/api", "v1", "example.com/api@v3.23.1/v1"},
		{"example.com/api", "cmd/v2", "example.com/api@v3.23.1/cmd"},
		{"example.com/api", "v0", "example.com/api@v3.23.1/v0"},
		{"example.com/api", "v10", "example.com/api@v3.23.1/api"},
	} {
		got, err := BinaryPath(c.module, "v3.23.1", c.pkg)
		require.NoError(t, err, "%s %s", c.module, c.pkg)
		assert.Equal(t, filepath.Join(cache, "targets", filepath.FromSlash(c.want)), got, "%s %s", c.module, c.pkg)
	}
	for _, pkg := range []string{"", "/cmd/x", "../x", "cmd/../../x"} {
		_, err := BinaryPath(gatekeeper, "v3.23.1", pkg)
		require.ErrorContains(t, err, "must be a directory inside the module", "%q", pkg)
	}
}

// fakeModule is a module directory with package cmd/tool, answered by a fake go command that
// builds by writing "binary" to the -o path.
func fakeModule(t *testing.T, build func(c goCall) error) (calls *[]goCall) {
	t.Helper()
	t.Setenv("GAUNTLET_CACHE", t.TempDir())
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "cmd", "tool"), 0o750))
	return fakeGo(t, func(c goCall) ([]byte, error) {
		switch {
		case c.is("mod", "download"):
			return []byte(`{"Dir": "` + dir + `"}`), nil
		case c.is("list", "-mod=readonly", "-f", "{{.Name}}"):
			return []byte("main\n"), nil
		case c.is("build"):
			return nil, build(c)
		}
		return nil, errors.New("unexpected go " + strings.Join(c.args, " "))
	})
}

func writeOutput(c goCall) error {
	o := slices.Index(c.args, "-o")
	return os.WriteFile(c.args[o+1], []byte("binary"), 0o700) //nolint:gosec // G306: an executable, as go build writes one
}

func TestBuildBuildsStaticallyIntoTheCache(t *testing.T) {
	var built goCall
	calls := fakeModule(t, func(c goCall) error { built = c; return writeOutput(c) })
	var progress bytes.Buffer
	got, err := Build(context.Background(), "example.com/tool", "v1.0.0", "cmd/tool", &progress)
	require.NoError(t, err)
	want, _ := BinaryPath("example.com/tool", "v1.0.0", "cmd/tool")
	assert.Equal(t, want, got)
	assert.FileExists(t, got)

	assert.Contains(t, built.env, "CGO_ENABLED=0")
	assert.Contains(t, built.args, "-trimpath")
	assert.Equal(t, "./cmd/tool", built.args[len(built.args)-1])
	assert.NotEqual(t, (*calls)[0].dir, built.dir, "the build runs in the module's directory, not the download's")
	tmp := built.args[slices.Index(built.args, "-o")+1]
	assert.NotEqual(t, got, tmp, "go build writes a temporary file, renamed into place")
	assert.NoFileExists(t, tmp)

	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	require.Len(t, lines, 2, "%s", progress.String())
	assert.Equal(t, "building example.com/tool@v1.0.0 (cmd/tool) — the first build takes minutes", lines[0])
	assert.Regexp(t, `^built example.com/tool@v1.0.0 \(cmd/tool\) in [0-9.]+m?s: `+regexp.QuoteMeta(got)+`$`, lines[1])
}

func TestBuildReusesTheCachedBinary(t *testing.T) {
	calls := fakeModule(t, writeOutput)
	first, err := Build(context.Background(), "example.com/tool", "v1.0.0", "cmd/tool", nil)
	require.NoError(t, err)
	n := len(*calls)
	var progress bytes.Buffer
	second, err := Build(context.Background(), "example.com/tool", "v1.0.0", "cmd/tool", &progress)
	require.NoError(t, err)
	assert.Equal(t, first, second)
	assert.Len(t, *calls, n, "no go command for a binary in the cache")
	assert.Empty(t, progress.String())
}

func TestBuildErrorCarriesGoBuildsOutput(t *testing.T) {
	fakeModule(t, func(c goCall) error {
		require.NoError(t, writeOutput(c)) // a half-written binary
		return errors.New("go build: exit status 1\ncmd/tool/main.go:3:2: undefined: missing")
	})
	var progress bytes.Buffer
	_, err := Build(context.Background(), "example.com/tool", "v1.0.0", "cmd/tool", &progress)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "building example.com/tool@v1.0.0 (cmd/tool): ")
	assert.Contains(t, err.Error(), "cmd/tool/main.go:3:2: undefined: missing")
	assert.Contains(t, progress.String(), "building example.com/tool@v1.0.0 (cmd/tool) failed after ")

	out, _ := BinaryPath("example.com/tool", "v1.0.0", "cmd/tool")
	entries, err := os.ReadDir(filepath.Dir(out))
	require.NoError(t, err)
	for _, e := range entries {
		assert.True(t, strings.HasSuffix(e.Name(), ".lock"), "a failed build leaves no binary, whole or half: %s", e.Name())
	}
}

func TestBuildRefusesALibraryOrAMissingPackage(t *testing.T) {
	fakeModule(t, writeOutput)
	_, err := Build(context.Background(), "example.com/tool", "v1.0.0", "cmd/other", nil)
	require.EqualError(t, err, "building example.com/tool@v1.0.0 (cmd/other): module example.com/tool@v1.0.0 has no directory cmd/other")

	saved := goCommand
	goCommand = func(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
		if args[0] == "list" {
			return []byte("tool\n"), nil
		}
		return saved(ctx, dir, env, args...)
	}
	_, err = Build(context.Background(), "example.com/tool", "v1.0.0", "cmd/tool", nil)
	require.EqualError(t, err, "building example.com/tool@v1.0.0 (cmd/tool): package cmd/tool is not a main package (it is package tool), so it builds no program")
}
