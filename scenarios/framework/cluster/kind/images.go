package kind

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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
