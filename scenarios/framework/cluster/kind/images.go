package kind

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

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

// scratchDockerfile packages one static executable, as operator/Dockerfile does. Its label says
// which binary the image holds and where, so that BuildScratchImage can tell an image it built
// from the same binary from any other image of that name.
const scratchDockerfile = `FROM scratch
COPY program %[1]s
USER 65532:65532
LABEL %[2]s=%[3]q
ENTRYPOINT [%[1]q]
`

// scratchLabel is the label of scratchDockerfile: "sha256:<the binary's hash> <its path>".
const scratchLabel = "dev.gauntlet.scratch-image"

// BuildScratchImage packages the static executable binary into an image FROM scratch tagged
// exactly ref (say, the image a chart names, openpolicyagent/gatekeeper:v3.23.1, so that the
// chart's pods find it once loaded), running as user 65532. The program sits at entrypoint, the
// image's ENTRYPOINT: the path the chart's command names, if it names one (/manager), or ""
// for /<binary's base name>. It builds nothing when Docker's image ref holds that binary at that
// path already; an image of that name holding anything else is replaced.
func BuildScratchImage(ctx context.Context, ref, binary, entrypoint string) error {
	if entrypoint == "" {
		entrypoint = "/" + filepath.Base(binary)
	}
	if !entrypointPattern.MatchString(entrypoint) || path.Clean(entrypoint) != entrypoint {
		return fmt.Errorf("building image %s: entrypoint %q must be a clean absolute path of letters, digits and . _ - (e.g. /manager)", ref, entrypoint)
	}
	st, err := os.Stat(binary)
	if err != nil {
		return fmt.Errorf("building image %s: %w", ref, err)
	}
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("building image %s: %s is not an executable file", ref, binary)
	}
	sum, err := fileHash(binary)
	if err != nil {
		return fmt.Errorf("building image %s: %w", ref, err)
	}
	content := "sha256:" + sum + " " + entrypoint
	if got, err := docker(ctx, "image", "inspect", "--format", `{{index .Config.Labels "`+scratchLabel+`"}}`, ref); err == nil && strings.TrimSpace(got) == content {
		return nil
	}
	// A build context of its own: the binary may sit in a read-only directory (the module
	// cache), or beside other files that Docker would send along.
	dir, err := os.MkdirTemp("", "gauntlet-scratch-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }() // a temporary build context
	if err := copyExecutable(binary, filepath.Join(dir, "program")); err != nil {
		return fmt.Errorf("building image %s: %w", ref, err)
	}
	dockerfile := filepath.Join(dir, "Dockerfile")
	if err := os.WriteFile(dockerfile, fmt.Appendf(nil, scratchDockerfile, entrypoint, scratchLabel, content), 0o600); err != nil {
		return err
	}
	return BuildImage(ctx, ref, dockerfile, dir)
}

var entrypointPattern = regexp.MustCompile(`^(/[A-Za-z0-9._-]+)+$`)

// copyExecutable copies src to dst, executable by anyone: the image runs it as user 65532,
// whoever owns src and whatever its mode.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src) //nolint:gosec // G304: the binary the caller packages
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }() // read only

	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755) //nolint:gosec // G302,G304: an executable in a build context of our own
	if err != nil {
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
