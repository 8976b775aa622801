package chainsaw

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// Module is Chainsaw's Go module; ToolsModule is the tools module that pins its version,
// relative to the workspace root (outside go.work: Chainsaw's k8s.io versions must not meet
// the workspace's).
const (
	Module      = "github.com/kyverno/chainsaw"
	ToolsModule = "hack/tools/chainsaw"
)

// PinnedVersion is the Chainsaw version the workspace at root pins.
func PinnedVersion(root string) (string, error) {
	file := filepath.Join(root, ToolsModule, "go.mod")
	data, err := os.ReadFile(file) //nolint:gosec // G304: the workspace's own tools module
	if err != nil {
		return "", fmt.Errorf("reading the Chainsaw pin: %w", err)
	}
	mod, err := modfile.ParseLax(file, data, nil)
	if err != nil {
		return "", fmt.Errorf("reading the Chainsaw pin: %w", err)
	}
	for _, r := range mod.Require {
		if r.Mod.Path == Module {
			return r.Mod.Version, nil
		}
	}
	return "", fmt.Errorf("reading the Chainsaw pin: %s requires no %s", file, Module)
}

// Build builds the pinned Chainsaw once (hack/tool.sh chainsaw caches it under
// ~/.cache/gauntlet/tools/chainsaw-<version>/) and returns the binary's path. Its progress goes
// to progress. A failed build is an error naming the pinned version and ending with the
// build's own output.
func Build(ctx context.Context, root string, progress io.Writer) (string, error) {
	version, err := PinnedVersion(root)
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "tool.sh"), "chainsaw") //nolint:gosec // G204: the workspace's own script
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &stdout, io.MultiWriter(&stderr, progress)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building Chainsaw %s (the version %s/go.mod pins) with hack/tool.sh chainsaw: %w:\n%s",
			version, ToolsModule, err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	bin := lines[len(lines)-1]
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		return "", fmt.Errorf("building Chainsaw %s: hack/tool.sh chainsaw printed %q, which is no binary", version, bin)
	}
	return bin, nil
}
