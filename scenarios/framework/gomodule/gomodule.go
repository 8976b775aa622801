// Package gomodule turns a Go module version that the Go module proxy serves into what a target
// needs, offline but for the proxy: its source in the module cache (Resolve), its main packages
// built statically into gauntlet's cache (Build), and a chart directory inside it (ChartDir).
//
// Everything runs the go command with GOWORK=off, so the gauntlet workspace's build list never
// meets the target's: a target builds with the dependency versions its own go.mod and go.sum pin.
package gomodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"golang.org/x/mod/module"
)

// goCommand runs the go command; tests replace it with a fake.
var goCommand = runGo

// runGo runs `go args…` in dir with GOWORK=off and env added to this process's environment. It
// returns what go printed on stdout, even when go fails (go mod download -json prints its
// errors there); the error carries go's stderr.
func runGo(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...) //nolint:gosec // G204: the go command with arguments this package builds
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// queryEnv is the environment of the go commands that only ask the proxy: -mod=mod so that a
// GOFLAGS=-mod=vendor of the caller's cannot get in the way.
var queryEnv = []string{"GOFLAGS=-mod=mod"}

// Resolve makes path@version available in the module cache, downloading it from the Go module
// proxy when it is not there yet, and returns its directory (read-only, as the module cache is).
// When the proxy does not serve that version, the error lists the versions it does serve.
func Resolve(ctx context.Context, path, version string) (string, error) {
	if err := check(path, version); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "gauntlet-gomodule-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }() // an empty directory: nothing to report

	// Outside any module, so the download records nothing in a go.mod or go.sum of the caller's.
	out, runErr := goCommand(ctx, tmp, queryEnv, "mod", "download", "-json", path+"@"+version)
	var dl struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &dl); jsonErr != nil && runErr == nil {
		return "", fmt.Errorf("downloading Go module %s@%s: reading go mod download's answer: %w", path, version, jsonErr)
	}
	if runErr == nil && dl.Error == "" && dl.Dir != "" {
		return dl.Dir, nil
	}
	cause := dl.Error
	if cause == "" && runErr != nil {
		cause = runErr.Error()
	}
	served, listErr := versions(ctx, tmp, path)
	switch {
	case listErr != nil || len(served) == 0:
		return "", fmt.Errorf("downloading Go module %s@%s: the Go module proxy does not know module %s (it lists no version of it): %s",
			path, version, path, cause)
	case !slices.Contains(served, version):
		return "", fmt.Errorf("downloading Go module %s@%s: the Go module proxy does not serve version %s of %s; it serves %s",
			path, version, version, path, listVersions(served))
	}
	return "", fmt.Errorf("downloading Go module %s@%s: %s", path, version, cause)
}

// check rejects what the proxy could never serve: a malformed module path, or a version that is
// not a canonical semantic version matching the path's major version suffix (/v3 needs v3.x.y).
// A target pins one exact version, so queries such as "latest" are refused too.
func check(path, version string) error {
	if err := module.CheckPath(path); err != nil {
		return fmt.Errorf("module %s@%s: %w", path, version, err)
	}
	if err := module.Check(path, version); err != nil {
		return fmt.Errorf("module %s@%s: %w (a target names one exact version, such as v1.2.3)", path, version, err)
	}
	return nil
}

// versions lists the versions of path that the proxy serves, oldest first.
func versions(ctx context.Context, dir, path string) ([]string, error) {
	out, err := goCommand(ctx, dir, queryEnv, "list", "-m", "-versions", "-json", path)
	if err != nil {
		return nil, err
	}
	var m struct{ Versions []string }
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("reading go list -m -versions %s: %w", path, err)
	}
	return m.Versions, nil
}

// maxListed is how many versions an error names: the newest ones, the likeliest to be meant.
const maxListed = 15

// listVersions names the versions served, the newest maxListed of them when there are more.
func listVersions(served []string) string {
	if len(served) <= maxListed {
		return strings.Join(served, ", ")
	}
	older := len(served) - maxListed
	return fmt.Sprintf("%s (and %d older)", strings.Join(served[older:], ", "), older)
}
