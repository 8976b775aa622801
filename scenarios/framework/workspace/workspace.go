// Package workspace locates the gauntlet workspace and its cache, and builds the workspace's
// programs: what every cluster provider needs before it can run the operator under test.
package workspace

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// Packages of the workspace that providers build; paths are relative to the workspace root.
const (
	OperatorPackage    = "./operator/cmd/dynamo-operator"
	CertManagerPackage = "./scenarios/tools/cmd/gauntlet-cert-manager"
	NodePackage        = "./scenarios/tools/cmd/gauntlet-node"
	// DelayProxyPackage is the delaying TCP proxy a suite that installs a target asks its
	// cluster to run as an image (W16's T9).
	DelayProxyPackage = "./scenarios/tools/cmd/gauntlet-delay-proxy"
	// StandInPackage is the program a target's stand-in images run (target.StandIn).
	StandInPackage = "./scenarios/tools/cmd/gauntlet-standin"
)

// How the stand-in program runs: its image's ENV StandInEnv is one of the two ways.
const (
	StandInEnv = "GAUNTLET_STAND_IN"
	// StandInUntilStopped: it stays up until SIGTERM, then exits 0 (a sidecar's stand-in).
	StandInUntilStopped = "untilStopped"
	// StandInExitAtOnce: it exits 0 at once (a hook Job's stand-in).
	StandInExitAtOnce = "exitAtOnce"
)

// operatorVersionVar is the variable -ldflags -X stamps the operator's version into.
const operatorVersionVar = "github.com/gauntlet-dev/gauntlet/operator/internal/version.Version"

// Root finds the gauntlet workspace: $GAUNTLET_ROOT, else the nearest directory above the
// working directory with a go.work and a scenarios module.
func Root() (string, error) {
	if d := os.Getenv("GAUNTLET_ROOT"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if exists(filepath.Join(dir, "go.work")) && exists(filepath.Join(dir, "scenarios", "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("gauntlet workspace not found above the working directory; set GAUNTLET_ROOT")
		}
		dir = parent
	}
}

// CacheDir is gauntlet's cache root, the same one the hack/ scripts write to:
// $GAUNTLET_CACHE, else $XDG_CACHE_HOME/gauntlet, else ~/.cache/gauntlet.
func CacheDir() string {
	if d := os.Getenv("GAUNTLET_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "gauntlet")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "gauntlet-cache")
	}
	return filepath.Join(home, ".cache", "gauntlet")
}

// BinDir is where workspace binaries are built: <cache>/bin.
func BinDir() string { return filepath.Join(CacheDir(), "bin") }

// KubernetesVersion is the Kubernetes version whose control-plane binaries `make control-plane`
// builds by default (the newest under hack/tools/k8s, see TestKubernetesVersionIsTheDefault) and
// that clusters run unless asked otherwise.
const KubernetesVersion = "v1.37.2"

// ControlPlaneDir is where `make control-plane` puts the control-plane binaries of a Kubernetes
// version: <cache>/k8s/<version>/bin.
func ControlPlaneDir(version string) string {
	return filepath.Join(CacheDir(), "k8s", version, "bin")
}

// ControlPlaneAssets finds the control-plane binaries a test starts itself (envtest's
// BinaryAssetsDirectory): $KUBEBUILDER_ASSETS, else ControlPlaneDir(KubernetesVersion). It fails
// naming the first of binaries missing there and how to get it.
func ControlPlaneAssets(binaries ...string) (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = ControlPlaneDir(KubernetesVersion)
	}
	for _, bin := range binaries {
		if !exists(filepath.Join(dir, bin)) {
			return "", fmt.Errorf("control-plane binary %s not found in %s: run `make control-plane` (or set KUBEBUILDER_ASSETS)", bin, dir)
		}
	}
	return dir, nil
}

// BuildOptions change how Build compiles.
type BuildOptions struct {
	// OperatorVersion, when set, is stamped into the operator (-ldflags -X).
	OperatorVersion string
	// Static builds without cgo and strips paths, for images built FROM scratch.
	Static bool
	// Cover instruments the operator module's packages (go build -cover): the binary writes
	// its counters into $GOCOVERDIR when it exits.
	Cover bool
	// Root builds from another checkout of the workspace (say, a git worktree of an older
	// revision) instead of Root().
	Root string
}

// OperatorCoverPackages are the packages a Cover build instruments: the whole operator module.
const OperatorCoverPackages = "github.com/gauntlet-dev/gauntlet/operator/..."

// Build builds main packages of the workspace (paths relative to its root, e.g.
// "./scenarios/tools/cmd/gauntlet-node") into outDir and returns their paths by package. go build is
// incremental, so an up-to-date binary costs a cache check only. A file lock keeps parallel
// test binaries from writing the same executable at once.
func Build(ctx context.Context, outDir string, o BuildOptions, pkgs ...string) (map[string]string, error) {
	root := o.Root
	if root == "" {
		var err error
		if root, err = Root(); err != nil {
			return nil, err
		}
	}
	if o.OperatorVersion != "" && !versionPattern.MatchString(o.OperatorVersion) {
		return nil, fmt.Errorf("building dynamo-operator: version %q must match %s", o.OperatorVersion, versionPattern)
	}
	if err := os.MkdirAll(outDir, 0o750); err != nil {
		return nil, err
	}
	unlock, err := Lock(filepath.Join(BinDir(), ".build.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	args := []string{"build"}
	if o.OperatorVersion != "" {
		args = append(args, "-ldflags", "-X "+operatorVersionVar+"="+o.OperatorVersion)
	}
	if o.Static {
		args = append(args, "-trimpath")
	}
	if o.Cover {
		args = append(args, "-cover", "-covermode=atomic", "-coverpkg="+OperatorCoverPackages)
	}
	args = append(args, "-o", outDir+string(filepath.Separator))
	out := map[string]string{}
	for _, p := range pkgs {
		args = append(args, p)
		out[p] = filepath.Join(outDir, filepath.Base(p))
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if o.Static {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, msg)
	}
	return out, nil
}

// BuildOperator builds dynamo-operator with version stamped in (the mutating webhook records it
// on DynamoGraphDeployments) from the workspace (Root) and returns its path,
// BinDir()/<OperatorDir>/dynamo-operator: one directory per workspace and version, so clusters
// running other sources or another version never replace each other's executable (a pod that
// starts later runs whatever binary is there then).
func BuildOperator(ctx context.Context, version string, cover bool) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	outDir := filepath.Join(BinDir(), OperatorDir(root, version, cover))
	built, err := Build(ctx, outDir, BuildOptions{Root: root, OperatorVersion: version, Cover: cover}, OperatorPackage)
	if err != nil {
		return "", err
	}
	return built[OperatorPackage], nil
}

// OperatorDir names the directory of BinDir() that BuildOperator builds into:
// dynamo-operator-<version>-<workspace> (the workspace: the first 8 hex digits of the SHA-256
// of its root's path), with -cover for a coverage-instrumented binary (BuildOptions.Cover).
func OperatorDir(root, version string, cover bool) string {
	sum := sha256.Sum256([]byte(root))
	dir := fmt.Sprintf("dynamo-operator-%s-%x", version, sum[:4])
	if cover {
		dir += "-cover"
	}
	return dir
}

var versionPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]*$`)

// Lock takes an exclusive lock on path (created if missing) shared by every gauntlet process
// on the machine; the returned func releases it.
func Lock(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // G304: a lock file in gauntlet's own cache
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close() // the lock error is the one to report
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil // closing the descriptor releases the lock, even when close reports an error
}

func exists(path string) bool {
	_, err := os.Stat(path) //nolint:gosec // G703: KUBEBUILDER_ASSETS and GAUNTLET_CACHE name these paths on purpose
	return err == nil
}
