package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// KwokVersion is the kwokctl release hack/local-binaries.sh builds.
const KwokVersion = "v0.8.0"

// operatorEntrypoint is where the operator's image holds its binary, the one thing it holds
// (operator/Dockerfile): a command, exec probe or hook naming anything else fails there, and so
// it does on the process node.
const operatorEntrypoint = "/dynamo-operator"

// operatorImage is what the node knows of the operator's image, binary the host's build of it.
func operatorImage(binary string) procnode.Image {
	return procnode.Image{Binary: binary, Entrypoint: operatorEntrypoint}
}

// resolveBinaries finds or builds every executable cfg needs and records each absolute path in
// cfg.Binaries, so that later commands (down, logs) run exactly what up ran. It returns the
// image map for the node: the defaults (the operator, when the workspace has it) plus cfg.Images.
func resolveBinaries(ctx context.Context, cfg *Config) (map[string]procnode.Image, error) {
	b := &cfg.Binaries
	if b.Dir == "" {
		b.Dir = workspace.ControlPlaneDir(cfg.KubernetesVersion)
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
		b.Kwokctl = filepath.Join(workspace.CacheDir(), "tools", "kwok-"+KwokVersion, "kwokctl")
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
	images := map[string]procnode.Image{}
	var pkgs []string
	if !cfg.Node.Disabled && b.Node == "" {
		pkgs = append(pkgs, workspace.NodePackage)
	}
	if cfg.CertManager.Enabled && b.CertManager == "" {
		pkgs = append(pkgs, workspace.CertManagerPackage)
	}
	_, mapped := cfg.Images[chart.OperatorImageRepository()]
	root, rootErr := workspace.Root()
	operatorPresent := rootErr == nil && fileExists(filepath.Join(root, workspace.OperatorPackage, "main.go"))
	if !cfg.Node.Disabled && !mapped && operatorPresent {
		pkgs = append(pkgs, workspace.OperatorPackage)
	}
	if len(pkgs) > 0 {
		built, err := workspace.Build(ctx, workspace.BinDir(), workspace.BuildOptions{}, pkgs...)
		if err != nil {
			return nil, err
		}
		if p, ok := built[workspace.NodePackage]; ok {
			b.Node = p
		}
		if p, ok := built[workspace.CertManagerPackage]; ok {
			b.CertManager = p
		}
		if p, ok := built[workspace.OperatorPackage]; ok {
			images[chart.OperatorImageRepository()] = operatorImage(p)
		}
	}
	for repo, img := range cfg.Images {
		images[repo] = img
	}
	for _, repo := range sortedImages(images) {
		programs := map[string]string{"binary": images[repo].Binary}
		for p, bin := range images[repo].Programs {
			programs["programs["+p+"]"] = bin
		}
		for _, field := range slices.Sorted(maps.Keys(programs)) {
			if err := executable(programs[field]); err != nil {
				errs = append(errs, &FieldError{Field: fmt.Sprintf("images[%s].%s", repo, field), Value: programs[field], Msg: err.Error()})
			}
		}
	}
	return images, errors.Join(errs...)
}

// buildKwokctl runs hack/local-binaries.sh, the one place that knows how kwokctl is built.
func buildKwokctl(ctx context.Context) error {
	root, err := workspace.Root()
	if err != nil {
		return fmt.Errorf("building kwokctl: %w", err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "local-binaries.sh")) //nolint:gosec // G204: the repository's own hack script
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GAUNTLET_CACHE="+workspace.CacheDir(), "KWOK_VERSION="+KwokVersion)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building kwokctl with hack/local-binaries.sh: %w\n%s", err, msg)
	}
	return nil
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
