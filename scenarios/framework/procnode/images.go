package procnode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
)

// imageMap resolves container images to what the node runs for them. The file is re-read on
// every lookup so the provider can add images (e.g. a freshly built operator) while the node runs.
type imageMap struct {
	file string
}

// Image is what the node knows of one image: the programs a FROM scratch image of it holds,
// by their paths in the image, and the files it carries. In the map file an image is either
// a string, the path of a binary alone (Binary), or an object of these fields.
type Image struct {
	// Binary is the image's main program: what a container runs when its command names none.
	Binary string `json:"binary"`
	// Entrypoint is the path the image holds Binary at. Without it (an image known by its
	// binary alone, the map's string form) Binary runs whatever the command names, and exec
	// probes and hooks run the host's programs: nothing is known of what else the image holds.
	Entrypoint string `json:"entrypoint,omitempty"`
	// Programs are the image's further programs: path in the image → host executable.
	Programs map[string]string `json:"programs,omitempty"`
	// Files are the files and directories the image carries: path in the image → host path.
	Files map[string]string `json:"files,omitempty"`
	// Env is the image's own environment (its ENV): the container's env overrides it.
	Env map[string]string `json:"env,omitempty"`

	ref string // the image reference a container named, for messages
}

// UnmarshalJSON reads an image as the path of its binary alone, or as an object.
func (img *Image) UnmarshalJSON(data []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte(`"`)) {
		*img = Image{}
		return json.Unmarshal(data, &img.Binary)
	}
	type fields Image // without this method
	return json.Unmarshal(data, (*fields)(img))
}

// MarshalJSON writes an image known by its binary alone in the string form.
func (img Image) MarshalJSON() ([]byte, error) {
	if !img.Described() {
		return json.Marshal(img.Binary)
	}
	type fields Image // without this method
	return json.Marshal(fields(img))
}

// Described says the node knows what the image holds (its entrypoint's path): a command or
// exec command naming anything else fails, as on a real node.
func (img Image) Described() bool { return img.Entrypoint != "" }

// holds is the host path of what the image holds at p (a clean absolute path): a program, a
// carried file, or a file under a carried directory — the innermost one when carried
// directories nest, as their mounts do (the inner one is mounted over the outer).
func (img Image) holds(p string) (string, bool) {
	if p == img.Entrypoint {
		return img.Binary, true
	}
	if bin, ok := img.Programs[p]; ok {
		return bin, true
	}
	found, at := "", ""
	for in, host := range img.Files {
		rest, ok := strings.CutPrefix(p, in)
		if ok && (rest == "" || strings.HasPrefix(rest, "/")) && len(in) > len(at) {
			found, at = host+rest, in
		}
	}
	return found, at != ""
}

// lookPath is the host path of the program a command names in the image, as a container
// runtime finds it: a name without a slash along the default PATH, any other from "/".
func (img Image) lookPath(name string) (string, error) {
	if !strings.Contains(name, "/") {
		for _, dir := range strings.Split(defaultPath, ":") {
			if host, ok := img.holds(path.Join(dir, name)); ok {
				return host, nil
			}
		}
		return "", &errNotInImage{image: img, program: name, why: "executable file not found in $PATH"}
	}
	p := path.Join("/", name)
	if host, ok := img.holds(p); ok {
		return host, nil
	}
	return "", &errNotInImage{image: img, program: name, why: fmt.Sprintf("stat %s: no such file or directory", p)}
}

// program is the host executable a container with command runs: the image's main program when
// the command names none (or the image is known by its binary alone), else what the image
// holds at the path command[0] names.
func (img Image) program(command []string) (string, error) {
	if len(command) == 0 || !img.Described() {
		return img.Binary, nil
	}
	return img.lookPath(command[0])
}

// contents lists what the image holds, for messages: its programs, then its carried files.
func (img Image) contents() string {
	programs := append([]string{img.Entrypoint}, sortedKeys(img.Programs)...)
	s := "the programs " + strings.Join(programs, ", ")
	if len(img.Files) > 0 {
		s += " and the files " + strings.Join(sortedKeys(img.Files), ", ")
	}
	return s
}

// errNotInImage is a command naming a program its image does not hold, said as a container
// runtime says it (exec: "/x": stat /x: no such file or directory), with what the image holds.
type errNotInImage struct {
	image   Image
	program string
	why     string
}

func (e *errNotInImage) Error() string {
	return fmt.Sprintf("exec: %q: %s: image %q holds only %s (a FROM scratch image holds nothing else), so a real node fails the same way",
		e.program, e.why, e.image.ref, e.image.contents())
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

// resolve returns what the node runs for image, ignoring its tag and digest; every program and
// carried file must exist on the host.
func (m imageMap) resolve(image string) (Image, error) {
	entries, err := readImageMap(m.file)
	if err != nil {
		return Image{}, err
	}
	repo := ImageRepository(image)
	img, ok := entries[repo]
	if !ok {
		return Image{}, &errImageNotMapped{image: image, repository: repo, file: m.file}
	}
	programs := map[string]string{img.Entrypoint: img.Binary}
	for p, bin := range img.Programs {
		programs[p] = bin
	}
	for _, p := range sortedKeys(programs) {
		bin := programs[p]
		info, err := os.Stat(bin)
		if err != nil {
			return Image{}, fmt.Errorf("binary %s for image %q (image map %s): %w", bin, image, m.file, err)
		}
		if info.IsDir() || info.Mode()&0o111 == 0 {
			return Image{}, fmt.Errorf("binary %s for image %q (image map %s) is not an executable file", bin, image, m.file)
		}
	}
	for _, p := range sortedKeys(img.Files) {
		if _, err := os.Stat(img.Files[p]); err != nil {
			return Image{}, fmt.Errorf("file %s that image %q carries at %s (image map %s): %w", img.Files[p], image, p, m.file, err)
		}
	}
	img.ref = image
	return img, nil
}

func readImageMap(file string) (map[string]Image, error) {
	raw, err := os.ReadFile(file) //nolint:gosec // G304: the image map the node was started with (--images)
	if err != nil {
		return nil, fmt.Errorf("reading image map %s: %w", file, err)
	}
	var entries map[string]Image
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("parsing image map %s (want a JSON object of repository → binary path, or → {binary, entrypoint, programs, files, env}): %w", file, err)
	}
	normalised := make(map[string]Image, len(entries))
	for repo, img := range entries {
		if err := img.Validate(); err != nil {
			return nil, fmt.Errorf("image map %s, image %s: %w", file, repo, err)
		}
		normalised[ImageRepository(repo)] = img
	}
	return normalised, nil
}

// Validate checks that every path in the image is clean and absolute, one thing at a path, and
// that programs and files are given only with the entrypoint's path.
func (img Image) Validate() error {
	if img.Binary == "" {
		return fmt.Errorf("binary: give the host path of the image's main program")
	}
	if !img.Described() && (len(img.Programs) > 0 || len(img.Files) > 0) {
		return fmt.Errorf("entrypoint: give the main program's path in the image; programs and files are paths beside it")
	}
	paths := append(sortedKeys(img.Programs), sortedKeys(img.Files)...)
	if img.Described() {
		paths = append(paths, img.Entrypoint)
	}
	for _, p := range paths {
		if !path.IsAbs(p) || path.Clean(p) != p {
			return fmt.Errorf("%q is no path in an image: give a clean absolute path (e.g. /manager)", p)
		}
	}
	slices.Sort(paths)
	for i := 1; i < len(paths); i++ {
		if paths[i] == paths[i-1] {
			return fmt.Errorf("%s is named twice: an image holds one thing at a path", paths[i])
		}
	}
	return nil
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
