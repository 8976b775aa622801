package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// KwokVersion is the kwokctl release hack/local-binaries.sh builds.
const KwokVersion = "v0.8.0"

// Image repositories the provider maps by default.
const (
	// OperatorImage is the chart's default operator image repository.
	OperatorImage = "dynamo-operator"
)

// Workspace packages the provider builds; paths are relative to the workspace root.
const (
	nodePackage        = "./scenarios/cmd/gauntlet-node"
	certManagerPackage = "./scenarios/cmd/gauntlet-cert-manager"
	operatorPackage    = "./operator/cmd/dynamo-operator"
)

// WorkspaceRoot finds the gauntlet workspace: $GAUNTLET_ROOT, else the nearest directory
// above the working directory with a go.work and a scenarios module.
func WorkspaceRoot() (string, error) {
	if d := os.Getenv("GAUNTLET_ROOT"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "go.work")) && fileExists(filepath.Join(dir, "scenarios", "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("gauntlet workspace not found above the working directory; set GAUNTLET_ROOT")
		}
		dir = parent
	}
}

// BinDir is where workspace binaries are built: <cache>/bin.
func BinDir() string { return filepath.Join(cacheDir(), "bin") }

// BuildWorkspaceBinaries builds main packages of the workspace (paths relative to its root,
// e.g. "./scenarios/cmd/gauntlet-node") into BinDir and returns their paths by package.
// go build is incremental, so an up-to-date binary costs a cache check only. A file lock
// keeps parallel test binaries from writing the same executable at once.
func BuildWorkspaceBinaries(ctx context.Context, pkgs ...string) (map[string]string, error) {
	root, err := WorkspaceRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(BinDir(), 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockFile(filepath.Join(BinDir(), ".build.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	return goBuild(ctx, root, BinDir(), nil, pkgs...)
}

// goBuild builds pkgs into outDir with extra go build flags and returns their paths by package.
func goBuild(ctx context.Context, root, outDir string, flags []string, pkgs ...string) (map[string]string, error) {
	out := map[string]string{}
	args := append(append([]string{"build"}, flags...), "-o", outDir+string(filepath.Separator))
	for _, p := range pkgs {
		args = append(args, p)
		out[p] = filepath.Join(outDir, filepath.Base(p))
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, msg)
	}
	return out, nil
}

// operatorVersionVar is the variable -ldflags -X stamps the operator's version into.
const operatorVersionVar = "github.com/gauntlet-dev/gauntlet/operator/internal/version.Version"

// BuildOperator builds dynamo-operator with version stamped in (the mutating webhook records it
// on DynamoGraphDeployments) and returns its path, BinDir()/dynamo-operator-<version>/dynamo-operator:
// one directory per version, so clusters running different versions never replace each other's
// executable. Map it with WithImages({OperatorImage: path}).
func BuildOperator(ctx context.Context, version string) (string, error) {
	if !versionPattern.MatchString(version) {
		return "", fmt.Errorf("building dynamo-operator: version %q must match %s", version, versionPattern)
	}
	root, err := WorkspaceRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(BinDir(), "dynamo-operator-"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(BinDir(), ".build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	built, err := goBuild(ctx, root, dir, []string{"-ldflags", "-X " + operatorVersionVar + "=" + version}, operatorPackage)
	if err != nil {
		return "", err
	}
	return built[operatorPackage], nil
}

var versionPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]*$`)

// resolveBinaries finds or builds every executable cfg needs and records each absolute path in
// cfg.Binaries, so that later commands (down, logs) run exactly what up ran. It returns the
// image map for the node: the defaults (the operator, when the workspace has it) plus cfg.Images.
func resolveBinaries(ctx context.Context, cfg *Config) (map[string]string, error) {
	b := &cfg.Binaries
	if b.Dir == "" {
		b.Dir = filepath.Join(cacheDir(), "k8s", cfg.KubernetesVersion, "bin")
	}
	var errs []error
	for _, c := range []struct {
		field, name string
		path        *string
	}{
		{"binaries.etcd", "etcd", &b.Etcd}, {"binaries.kubeApiserver", "kube-apiserver", &b.KubeAPIServer},
		{"binaries.kubeControllerManager", "kube-controller-manager", &b.KubeControllerManager},
		{"binaries.kubeScheduler", "kube-scheduler", &b.KubeScheduler}, {"binaries.kubectl", "kubectl", &b.Kubectl},
	} {
		if *c.path == "" {
			*c.path = filepath.Join(b.Dir, c.name)
		}
		if err := executable(*c.path); err != nil {
			errs = append(errs, &FieldError{Field: c.field, Value: *c.path, Msg: err.Error() + " (build it with `make control-plane`)"})
		}
	}
	if b.Kwokctl == "" {
		b.Kwokctl = filepath.Join(cacheDir(), "tools", "kwok-"+KwokVersion, "kwokctl")
		if executable(b.Kwokctl) != nil {
			if err := buildKwokctl(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := executable(b.Kwokctl); err != nil {
		errs = append(errs, &FieldError{Field: "binaries.kwokctl", Value: b.Kwokctl, Msg: err.Error()})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	// Workspace binaries: build what is needed and not given.
	images := map[string]string{}
	var pkgs []string
	if !cfg.Node.Disabled && b.Node == "" {
		pkgs = append(pkgs, nodePackage)
	}
	if cfg.CertManager.Enabled && b.CertManager == "" {
		pkgs = append(pkgs, certManagerPackage)
	}
	_, mapped := cfg.Images[OperatorImage]
	root, rootErr := WorkspaceRoot()
	operatorPresent := rootErr == nil && fileExists(filepath.Join(root, operatorPackage, "main.go"))
	if !cfg.Node.Disabled && !mapped && operatorPresent {
		pkgs = append(pkgs, operatorPackage)
	}
	if len(pkgs) > 0 {
		built, err := BuildWorkspaceBinaries(ctx, pkgs...)
		if err != nil {
			return nil, err
		}
		if p, ok := built[nodePackage]; ok {
			b.Node = p
		}
		if p, ok := built[certManagerPackage]; ok {
			b.CertManager = p
		}
		if p, ok := built[operatorPackage]; ok {
			images[OperatorImage] = p
		}
	}
	for repo, path := range cfg.Images {
		images[repo] = path
	}
	for _, repo := range sortedImages(images) {
		if err := executable(images[repo]); err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("images[%s]", repo), Value: images[repo], Msg: err.Error()})
		}
	}
	return images, errors.Join(errs...)
}

// buildKwokctl runs hack/local-binaries.sh, the one place that knows how kwokctl is built.
func buildKwokctl(ctx context.Context) error {
	root, err := WorkspaceRoot()
	if err != nil {
		return fmt.Errorf("building kwokctl: %w", err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "local-binaries.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GAUNTLET_CACHE="+cacheDir(), "KWOK_VERSION="+KwokVersion)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building kwokctl with hack/local-binaries.sh: %w\n%s", err, msg)
	}
	return nil
}

// lockFile takes an exclusive lock on path (created if missing) shared by every gauntlet
// process on the machine; the returned func releases it.
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing the descriptor releases the lock
}

func executable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errors.New("no such file")
		}
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
