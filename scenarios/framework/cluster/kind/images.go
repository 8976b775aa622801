package kind

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// nodeImageScript builds the offline node image; the one place that knows the recipe.
const nodeImageScript = "hack/kind-node-image.sh"

// BuildNodeImage builds (or finds in Docker, in seconds) the offline node image for a
// Kubernetes version with hack/kind-node-image.sh and returns its reference. The script's
// progress goes to progress.
func BuildNodeImage(ctx context.Context, version string, progress io.Writer) (string, error) {
	root, err := workspace.Root()
	if err != nil {
		return "", fmt.Errorf("building the kind node image: %w", err)
	}
	if progress == nil {
		progress = io.Discard
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, nodeImageScript)) //nolint:gosec // G204: the repository's own hack script
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "K8S_VERSION="+version, "GAUNTLET_CACHE="+workspace.CacheDir())
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the kind node image for Kubernetes %s (%s): %w", version, nodeImageScript, err)
	}
	lines := strings.Fields(stdout.String())
	if len(lines) == 0 {
		return "", fmt.Errorf("%s printed no image reference", nodeImageScript)
	}
	return lines[len(lines)-1], nil
}

// BuildImage builds a Docker image tagged ref from dockerfile with contextDir as its context
// (no BuildKit, no registry: every FROM must be local or scratch).
func BuildImage(ctx context.Context, ref, dockerfile, contextDir string) error {
	cmd := exec.CommandContext(ctx, "docker", "build", "-q", "-f", dockerfile, "-t", ref, contextDir) //nolint:gosec // G204: docker build of the image the caller names
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building image %s from %s: %w\n%s", ref, dockerfile, err, out)
	}
	return nil
}

// scratchLabel labels an image BuildScratchImage built with the hash of its build context, so
// that it can tell an image it built from the same programs, files and paths from any other
// image of that name.
const scratchLabel = "dev.gauntlet.scratch-image"

// BuildScratchImage packages img into an image FROM scratch tagged exactly ref (say, the image
// a chart names, openpolicyagent/gatekeeper:v3.23.1, so that the chart's pods find it once
// loaded), running as user 65532: its entrypoint at img.Entrypoint (the image's ENTRYPOINT, the
// path the chart's command names, e.g. /manager), its further programs and files at their
// paths, its environment as ENV. It holds nothing else, as the FROM scratch images operators
// ship. It builds nothing when Docker's image ref was built from the same context already; an
// image of that name holding anything else is replaced.
func BuildScratchImage(ctx context.Context, ref string, img cluster.Image) error {
	// A build context of its own: the programs may sit in a read-only directory (the module
	// cache), or beside other files that Docker would send along.
	dir, err := os.MkdirTemp("", "gauntlet-scratch-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }() // a temporary build context
	content, err := writeScratchContext(dir, img)
	if err != nil {
		return fmt.Errorf("building image %s: %w", ref, err)
	}
	if got, err := docker(ctx, "image", "inspect", "--format", `{{index .Config.Labels "`+scratchLabel+`"}}`, ref); err == nil && strings.TrimSpace(got) == content {
		return nil
	}
	return BuildImage(ctx, ref, filepath.Join(dir, "Dockerfile"), dir)
}

// writeScratchContext writes img's build context into dir: each program under programs/, each
// file or directory under files/, and a Dockerfile copying them to their paths in the image.
// It returns the context's hash, which the Dockerfile labels the image with.
func writeScratchContext(dir string, img cluster.Image) (string, error) {
	programs := map[string]string{img.Entrypoint: img.Binary}
	for p, bin := range img.Programs {
		programs[p] = bin
	}
	var df strings.Builder
	df.WriteString("FROM scratch\n")
	for i, p := range append(slices.Sorted(maps.Keys(programs)), slices.Sorted(maps.Keys(img.Files))...) {
		if !imagePathPattern.MatchString(p) || path.Clean(p) != p {
			return "", fmt.Errorf("%q must be a clean absolute path of letters, digits and . _ - (e.g. /manager)", p)
		}
		var src string
		var err error
		if bin, ok := programs[p]; ok {
			src = fmt.Sprintf("programs/%d", i)
			err = copyExecutable(bin, filepath.Join(dir, src))
		} else {
			src = fmt.Sprintf("files/%d", i)
			err = copyReadable(img.Files[p], filepath.Join(dir, src))
		}
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&df, "COPY %s %s\n", src, p)
	}
	for _, k := range slices.Sorted(maps.Keys(img.Env)) {
		fmt.Fprintf(&df, "ENV %s=%q\n", k, img.Env[k])
	}
	fmt.Fprintf(&df, "USER 65532:65532\nENTRYPOINT [%q]\n", img.Entrypoint)
	sum, err := contextHash(dir, df.String())
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&df, "LABEL %s=%q\n", scratchLabel, sum)
	return sum, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df.String()), 0o600)
}

var imagePathPattern = regexp.MustCompile(`^(/[A-Za-z0-9._-]+)+$`)

// contextHash is "sha256:<hex>" of the Dockerfile and of every file of the context: its path,
// mode and content.
func contextHash(dir, dockerfile string) (string, error) {
	h := sha256.New()
	_, _ = io.WriteString(h, dockerfile)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum, err := fileHash(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		_, _ = fmt.Fprintf(h, "%s %o %s\n", rel, info.Mode().Perm(), sum)
		return nil
	})
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), err
}

// copyReadable copies the file or directory src to dst, readable by anyone (directories
// searchable): the image's programs run as user 65532 and read them.
func copyReadable(src, dst string) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return copyFile(src, dst, 0o644)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755) //nolint:gosec // G301: a directory the image's user 65532 reads
		}
		return copyFile(p, target, 0o644)
	})
}

// copyExecutable copies src to dst, executable by anyone: the image runs it as user 65532,
// whoever owns src and whatever its mode. src must be an executable file.
func copyExecutable(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", src)
	}
	return copyFile(src, dst, 0o755)
}

// copyFile copies src to dst (a new file, its directory made if need be) with mode perm.
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src) //nolint:gosec // G304: a program or file the caller packages
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }() // read only

	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil { //nolint:gosec // G301: a build context of our own, read by Docker
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm) //nolint:gosec // G304: a file in a build context of our own
	if err != nil {
		return err
	}
	if err := out.Chmod(perm); err != nil { // whatever the umask
		_ = out.Close()
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close() // the copy error is the one to report
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return out.Close()
}

func fileHash(file string) (string, error) {
	f, err := os.Open(file) //nolint:gosec // G304: a binary gauntlet just built
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read only
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", file, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// LoadImages copies local Docker images into every node's containerd, as `kind load
// docker-image` does; pods with imagePullPolicy IfNotPresent then never pull them.
func (p *Provider) LoadImages(ctx context.Context, refs ...string) error {
	nodes, err := p.kind.ListInternalNodes(p.name)
	if err != nil {
		return fmt.Errorf("listing the nodes of kind cluster %q: %w", p.name, err)
	}
	for _, ref := range refs {
		for _, n := range nodes {
			if err := loadImage(ctx, ref, n); err != nil {
				return err
			}
		}
	}
	return nil
}

func loadImage(ctx context.Context, ref string, n nodes.Node) error {
	save := exec.CommandContext(ctx, "docker", "save", ref) //nolint:gosec // G204: docker save of the image the caller loads
	archive, err := save.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	save.Stderr = &stderr
	if err := save.Start(); err != nil {
		return fmt.Errorf("docker save %s: %w", ref, err)
	}
	loadErr := nodeutils.LoadImageArchive(n, archive)
	_, _ = io.Copy(io.Discard, archive)
	if err := save.Wait(); err != nil {
		return fmt.Errorf("docker save %s: %w: %s (is the image built? docker image ls %s)", ref, err, strings.TrimSpace(stderr.String()), ref)
	}
	if loadErr != nil {
		return fmt.Errorf("loading image %s into node %s: %w", ref, n, loadErr)
	}
	return nil
}
