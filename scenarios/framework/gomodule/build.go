package gomodule

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// CacheDir is where Build puts the binaries of modulePath@version:
// <gauntlet cache>/targets/<module path>@<version>, both escaped as the module cache escapes
// them (an uppercase letter becomes '!' and its lowercase), so that two module paths differing
// only in case never share a directory on a case-insensitive file system.
func CacheDir(modulePath, version string) (string, error) {
	escPath, err := module.EscapePath(modulePath)
	if err != nil {
		return "", fmt.Errorf("module %s@%s: %w", modulePath, version, err)
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return "", fmt.Errorf("module %s@%s: %w", modulePath, version, err)
	}
	return filepath.Join(workspace.CacheDir(), "targets", filepath.FromSlash(escPath)+"@"+escVersion), nil
}

// BinaryPath is where Build puts main package pkg (relative to the module's root, "." for the
// root) of modulePath@version: CacheDir/<name>, the name being the one go build gives it (the
// package path's last element, or the one before a major version suffix: gatekeeper/v3 →
// gatekeeper).
func BinaryPath(modulePath, version, pkg string) (string, error) {
	rel, err := packageDir(pkg)
	if err != nil {
		return "", fmt.Errorf("module %s@%s: %w", modulePath, version, err)
	}
	dir, err := CacheDir(modulePath, version)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, binaryName(modulePath, rel)), nil
}

// Build builds main package pkg of modulePath@version (pkg relative to the module's root, "."
// for the root) and returns the binary's path, BinaryPath. A binary already there is reused as
// it is: a module version's source never changes. The build is static (CGO_ENABLED=0, so an image
// FROM scratch can run it) and -trimpath, and runs in the module's directory in the module cache
// with GOWORK=off, so the module's own go.mod and go.sum pin every dependency. progress (nil for
// none) gets a line when the build starts and one when it ends.
func Build(ctx context.Context, modulePath, version, pkg string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	out, err := BinaryPath(modulePath, version, pkg)
	if err != nil {
		return "", err
	}
	rel, _ := packageDir(pkg) // BinaryPath checked it
	what := fmt.Sprintf("%s@%s (%s)", modulePath, version, rel)
	if executable(out) {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o750); err != nil {
		return "", err
	}
	// Two gauntlet processes wanting the same binary build it once: the second waits here and
	// then finds it.
	unlock, err := workspace.Lock(filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if executable(out) {
		return out, nil
	}

	dir, err := Resolve(ctx, modulePath, version)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel))); err != nil || !st.IsDir() {
		return "", fmt.Errorf("building %s: module %s@%s has no directory %s", what, modulePath, version, rel)
	}
	target := "./" + rel
	if rel == "." {
		target = "."
	}
	start := time.Now()
	_, _ = fmt.Fprintf(progress, "building %s — the first build takes minutes\n", what)
	failed := func(err error) (string, error) {
		_, _ = fmt.Fprintf(progress, "building %s failed after %s\n", what, since(start))
		return "", fmt.Errorf("building %s: %w", what, err)
	}
	// -mod=readonly: the module cache is read-only, and a go.mod that is not tidy must fail
	// rather than build with versions its authors did not pin.
	name, err := goCommand(ctx, dir, nil, "list", "-mod=readonly", "-f", "{{.Name}}", target)
	if err != nil {
		return failed(err)
	}
	if n := strings.TrimSpace(string(name)); n != "main" {
		return failed(fmt.Errorf("package %s is not a main package (it is package %s), so it builds no program", rel, n))
	}
	// A name of this process's own, renamed into place whole: an interrupted build leaves no
	// half binary where the next run would take it for a built one.
	tmp := filepath.Join(filepath.Dir(out), fmt.Sprintf(".%s.%d.tmp", filepath.Base(out), os.Getpid()))
	if _, err := goCommand(ctx, dir, []string{"CGO_ENABLED=0"}, "build", "-mod=readonly", "-trimpath", "-o", tmp, target); err != nil {
		_ = os.Remove(tmp) // the build error is the one to report
		return failed(err)
	}
	if err := os.Rename(tmp, out); err != nil {
		_ = os.Remove(tmp) // the rename error is the one to report
		return failed(err)
	}
	_, _ = fmt.Fprintf(progress, "built %s in %s: %s\n", what, since(start), out)
	return out, nil
}

// packageDir checks pkg, a package directory relative to a module's root, and returns it
// cleaned and slash-separated ("." for the root).
func packageDir(pkg string) (string, error) {
	p := path.Clean(filepath.ToSlash(pkg))
	if pkg == "" || path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("package %q must be a directory inside the module, relative to its root (\".\" for the root, or e.g. cmd/tool)", pkg)
	}
	return p, nil
}

// binaryName is the name go build gives the program of package rel of module modulePath: the
// import path's last element, unless that is a major version suffix (v2, v3, …), in which case
// the element before it (cmd/go's DefaultExecName).
func binaryName(modulePath, rel string) string {
	importPath := modulePath
	if rel != "." {
		importPath += "/" + rel
	}
	elem := path.Base(importPath)
	if elem != importPath && isMajorVersionSuffix(elem) {
		elem = path.Base(path.Dir(importPath))
	}
	return elem
}

// isMajorVersionSuffix reports whether elem is v2, v3, …: v0, v1 and v01 are not.
func isMajorVersionSuffix(elem string) bool {
	if len(elem) < 2 || elem[0] != 'v' || elem[1] == '0' || (elem[1] == '1' && len(elem) == 2) {
		return false
	}
	for _, c := range elem[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// since is the time since start, rounded for a person to read.
func since(start time.Time) time.Duration {
	return time.Since(start).Round(100 * time.Millisecond)
}
