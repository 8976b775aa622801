package procnode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestImageRepositoryIgnoresTagDigestAndDockerHubPrefix(t *testing.T) {
	for image, want := range map[string]string{
		"nvcr.io/nvidia/ai-dynamo/kubernetes-operator:0.9.0": "nvcr.io/nvidia/ai-dynamo/kubernetes-operator",
		"registry.local:5000/team/op@sha256:abcd":            "registry.local:5000/team/op",
		"registry.local:5000/team/op:v1@sha256:abcd":         "registry.local:5000/team/op",
		"registry.local:5000/team/op":                        "registry.local:5000/team/op",
		"docker.io/library/nginx:1.27":                       "nginx",
		"docker.io/bitnami/kubectl:latest":                   "bitnami/kubectl",
		"nginx":                                              "nginx",
	} {
		got := ImageRepository(image)
		assert.Equal(t, want, got, "ImageRepository(%q) = %q, want %q", image, got, want)
	}
}

func TestImageMapResolvesByRepositoryAndRereadsTheFile(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "operator")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700)) //nolint:gosec // G306: a fake image binary; the image map wants it executable
	file := filepath.Join(dir, "images.json")
	m := imageMap{file: file}
	require.NoError(t, os.WriteFile(file, []byte(`{}`), 0o600))
	_, err := m.resolve("ghcr.io/x/operator:v2")
	var notMapped *errImageNotMapped
	require.ErrorAs(t, err, &notMapped, "resolve of an unknown image = %v, want errImageNotMapped", err)
	msg := err.Error()
	require.Contains(t, msg, `"ghcr.io/x/operator:v2"`, "error %q names neither the image nor the map file", msg)
	require.Contains(t, msg, file, "error %q names neither the image nor the map file", msg)
	// The provider may add an image while the node runs.
	require.NoError(t, os.WriteFile(file, []byte(`{"ghcr.io/x/operator:latest": "`+bin+`"}`), 0o600))
	got, err := m.resolve("ghcr.io/x/operator@sha256:0123")
	require.NoError(t, err, "resolve = %q, %v; want %s", got, err, bin)
	require.Equal(t, bin, got, "resolve = %q, %v; want %s", got, err, bin)
}

func TestImageMapRejectsNonExecutableBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "data")
	require.NoError(t, os.WriteFile(bin, nil, 0o600))
	file := filepath.Join(dir, "images.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"op": "`+bin+`"}`), 0o600))
	_, err := (imageMap{file: file}).resolve("op:1")
	require.ErrorContains(t, err, "not an executable file", "resolve of a non-executable = %v", err)
}
