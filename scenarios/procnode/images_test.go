package procnode

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		if got := imageRepository(image); got != want {
			t.Errorf("imageRepository(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestImageMapResolvesByRepositoryAndRereadsTheFile(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "operator")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700); err != nil { //nolint:gosec // G306: a fake image binary; the image map wants it executable
		t.Fatal(err)
	}
	file := filepath.Join(dir, "images.json")
	m := imageMap{file: file}
	if err := os.WriteFile(file, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := m.resolve("ghcr.io/x/operator:v2")
	var notMapped *errImageNotMapped
	if !errors.As(err, &notMapped) {
		t.Fatalf("resolve of an unknown image = %v, want errImageNotMapped", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"ghcr.io/x/operator:v2"`) || !strings.Contains(msg, file) {
		t.Fatalf("error %q names neither the image nor the map file", msg)
	}
	// The provider may add an image while the node runs.
	if err := os.WriteFile(file, []byte(`{"ghcr.io/x/operator:latest": "`+bin+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := m.resolve("ghcr.io/x/operator@sha256:0123")
	if err != nil || got != bin {
		t.Fatalf("resolve = %q, %v; want %s", got, err, bin)
	}
}

func TestImageMapRejectsNonExecutableBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "data")
	if err := os.WriteFile(bin, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "images.json")
	if err := os.WriteFile(file, []byte(`{"op": "`+bin+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (imageMap{file: file}).resolve("op:1"); err == nil || !strings.Contains(err.Error(), "not an executable file") {
		t.Fatalf("resolve of a non-executable = %v", err)
	}
}
