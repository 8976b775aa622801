package procnode

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// imageMap resolves container images to host binaries. The file is re-read on every lookup
// so the provider can add images (e.g. a freshly built operator) while the node runs.
type imageMap struct {
	file string
}

// errImageNotMapped says which image had no binary and where the map lives, so the person
// reading `kubectl describe pod` knows what to edit.
type errImageNotMapped struct {
	image, repository, file string
}

func (e *errImageNotMapped) Error() string {
	return fmt.Sprintf("image %q (repository %q) has no binary in the image map %s: add \"%s\": \"/path/to/binary\"",
		e.image, e.repository, e.file, e.repository)
}

// resolve returns the binary for image, ignoring its tag and digest.
func (m imageMap) resolve(image string) (string, error) {
	entries, err := readImageMap(m.file)
	if err != nil {
		return "", err
	}
	repo := ImageRepository(image)
	bin, ok := entries[repo]
	if !ok {
		return "", &errImageNotMapped{image: image, repository: repo, file: m.file}
	}
	info, err := os.Stat(bin)
	if err != nil {
		return "", fmt.Errorf("binary %s for image %q (image map %s): %w", bin, image, m.file, err)
	}
	if info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("binary %s for image %q (image map %s) is not an executable file", bin, image, m.file)
	}
	return bin, nil
}

func readImageMap(file string) (map[string]string, error) {
	raw, err := os.ReadFile(file) //nolint:gosec // G304: the image map the node was started with (--images)
	if err != nil {
		return nil, fmt.Errorf("reading image map %s: %w", file, err)
	}
	var entries map[string]string
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("parsing image map %s (want a JSON object of repository → binary path): %w", file, err)
	}
	normalised := make(map[string]string, len(entries))
	for repo, bin := range entries {
		normalised[ImageRepository(repo)] = bin
	}
	return normalised, nil
}

// ImageRepository strips the tag and digest and Docker Hub's implicit prefixes, so that
// "nginx:1.27", "docker.io/library/nginx@sha256:…" and "nginx" all name "nginx".
func ImageRepository(image string) string {
	repo := image
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	// A colon after the last slash is a tag; one before it belongs to a registry host:port.
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	for _, prefix := range []string{"docker.io/library/", "index.docker.io/library/", "docker.io/", "index.docker.io/"} {
		if strings.HasPrefix(repo, prefix) {
			repo = strings.TrimPrefix(repo, prefix)
			break
		}
	}
	return repo
}
