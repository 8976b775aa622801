package procnode

import (
	"encoding/json"
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

// executable writes a file the image map accepts as a program.
func executable(t *testing.T, dir, name string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700)) //nolint:gosec // G306: a fake image binary; the image map wants it executable
	return bin
}

func TestImageMapResolvesByRepositoryAndRereadsTheFile(t *testing.T) {
	dir := t.TempDir()
	bin := executable(t, dir, "operator")
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
	require.NoError(t, err, "resolve = %+v, %v; want %s", got, err, bin)
	require.Equal(t, bin, got.Binary, "resolve = %+v; want binary %s", got, bin)
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

func TestTheImageMapKeepsAnImageKnownByItsBinaryAloneAsAString(t *testing.T) {
	described := Image{Binary: "/cache/manager", Entrypoint: "/manager", Programs: map[string]string{"/crd-apply": "/cache/crd-apply"}}
	raw, err := json.Marshal(map[string]Image{"op": {Binary: "/cache/op"}, "manager": described})
	require.NoError(t, err)
	assert.JSONEq(t, `{"op": "/cache/op", "manager": {"binary": "/cache/manager", "entrypoint": "/manager", "programs": {"/crd-apply": "/cache/crd-apply"}}}`, string(raw))
	var back map[string]Image
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, map[string]Image{"op": {Binary: "/cache/op"}, "manager": described}, back, "the map read back")
}

func TestImageMapRefusesAnEntryThatIsNoImage(t *testing.T) {
	dir := t.TempDir()
	bin := executable(t, dir, "manager")
	for entry, want := range map[string]string{
		`{"binary": "` + bin + `", "programs": {"/crd-apply": "` + bin + `"}}`:                          "entrypoint: give the main program's path in the image",
		`{"binary": "` + bin + `", "entrypoint": "manager"}`:                                            `"manager" is no path in an image: give a clean absolute path`,
		`{"binary": "` + bin + `", "entrypoint": "/manager", "files": {"/opt/../crds": "` + dir + `"}}`: `"/opt/../crds" is no path in an image`,
		`{"binary": "` + bin + `", "entrypoint": "/manager", "programs": {"/manager": "` + bin + `"}}`:  "/manager is named twice",
		`{"binary": "` + bin + `", "entrypoint": "/manager", "files": {"/crds": "` + dir + `/none"}}`:   "file " + dir + "/none that image \"op:1\" carries at /crds",
	} {
		file := filepath.Join(dir, "images.json")
		require.NoError(t, os.WriteFile(file, []byte(`{"op": `+entry+`}`), 0o600))
		_, err := (imageMap{file: file}).resolve("op:1")
		assert.ErrorContains(t, err, want, "image map entry %s", entry)
	}
}

func TestAContainerRunsTheProgramItsCommandNames(t *testing.T) {
	img := Image{
		Binary: "/cache/manager", Entrypoint: "/manager",
		Programs: map[string]string{"/crd-apply": "/cache/crd-apply", "/usr/bin/wait": "/cache/wait"},
		Files:    map[string]string{"/opt/crds": "/module/config/crds"},
		ref:      "nvcr.io/x/operator:1.0",
	}
	for command, want := range map[string]string{
		"":                     "/cache/manager",
		"/manager":             "/cache/manager",
		"/crd-apply":           "/cache/crd-apply",
		"//crd-apply":          "/cache/crd-apply",
		"wait":                 "/cache/wait",
		"/opt/crds/apply.sh":   "/module/config/crds/apply.sh",
		"/usr/bin/../bin/wait": "/cache/wait",
	} {
		var cmd []string
		if command != "" {
			cmd = []string{command, "--flag"}
		}
		got, err := img.program(cmd)
		if assert.NoError(t, err, "command %q", command) {
			assert.Equal(t, want, got, "command %q", command)
		}
	}

	_, err := img.program([]string{"/x"})
	require.EqualError(t, err, `exec: "/x": stat /x: no such file or directory: image "nvcr.io/x/operator:1.0" holds only `+
		`the programs /manager, /crd-apply, /usr/bin/wait and the files /opt/crds (a FROM scratch image holds nothing else), so a real node fails the same way`)
	_, err = img.program([]string{"sleep", "5"})
	require.ErrorContains(t, err, `exec: "sleep": executable file not found in $PATH: image "nvcr.io/x/operator:1.0" holds only`)
	_, err = img.program([]string{"/opt/crdsx"})
	require.ErrorContains(t, err, `stat /opt/crdsx: no such file or directory`, "a path beside a carried directory is not in it")

	alone := Image{Binary: "/cache/op"}
	got, err := alone.program([]string{"/anything"})
	require.NoError(t, err)
	assert.Equal(t, "/cache/op", got, "an image known by its binary alone runs it whatever the command names")
}

func TestTheInnermostCarriedDirectoryHoldsAPathAsItsMountDoes(t *testing.T) {
	img := Image{
		Binary: "/cache/manager", Entrypoint: "/manager",
		Files: map[string]string{"/opt": "/module/opt", "/opt/crds": "/module/config/crds", "/opt/crds/extra": "/module/extra"},
	}
	for range 20 { // map order varies from one range to the next
		for p, want := range map[string]string{
			"/opt/tool":           "/module/opt/tool",
			"/opt/crds/apply.sh":  "/module/config/crds/apply.sh",
			"/opt/crds/extra/run": "/module/extra/run",
			"/opt/crdsx/run":      "/module/opt/crdsx/run",
			"/opt/crds/extra":     "/module/extra",
		} {
			got, ok := img.holds(p)
			assert.True(t, ok, p)
			assert.Equal(t, want, got, "%s is under the carried directories %v", p, sortedKeys(img.Files))
		}
	}
}
