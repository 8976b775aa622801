package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// ExportLogs copies every log of the cluster into dest: the control plane's components
// (control-plane/<component>.log), the node agent and cert-manager, each container's output as
// the node agent kept it (pods/…), the cluster's configuration, and a YAML dump of the objects
// that explain a failure (nodes, pods, services, endpoint slices, workloads, events).
func (p *Provider) ExportLogs(ctx context.Context, dest string) error {
	l := newLayout(p.name)
	if _, err := os.Stat(l.dir); err != nil {
		return fmt.Errorf("exporting logs of cluster %q: %w", p.name, err)
	}
	// Exported logs are for the user who exports them: 0750 directories, 0600 files.
	if err := os.MkdirAll(dest, 0o750); err != nil {
		return err
	}
	var errs []error
	k := &kwokctl{layout: l}
	for component, path := range k.logFiles() {
		errs = append(errs, copyFile(path, filepath.Join(dest, "control-plane", component+".log")))
	}
	errs = append(errs,
		copyTree(l.logs(), dest),
		copyTree(filepath.Join(l.nodeState(), "logs"), filepath.Join(dest, "pods")),
	)
	for _, f := range []string{l.config(), l.kwokConfig(), l.images()} {
		if fileExists(f) {
			errs = append(errs, copyFile(f, filepath.Join(dest, filepath.Base(f))))
		}
	}
	cfg, err := p.Config()
	if err == nil {
		errs = append(errs, dumpResources(ctx, cfg.Binaries.Kubectl, l.kubeconfig(), filepath.Join(dest, "resources.yaml")))
	}
	return errors.Join(errs...)
}

func dumpResources(ctx context.Context, kubectl, kubeconfig, dest string) (err error) {
	out, err := os.OpenFile(dest, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600) //nolint:gosec // G304: a file in the export directory the user chose
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	//nolint:gosec // G204: the cluster's own kubectl, with a fixed get
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "get", "--all-namespaces", "-o", "yaml",
		"nodes,namespaces,pods,services,endpointslices,deployments,replicasets,events,leases,validatingwebhookconfigurations,mutatingwebhookconfigurations")
	cmd.Stdout = out
	msg, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("dumping resources with kubectl: %w", err)
	}
	stderr, _ := io.ReadAll(msg)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("dumping resources with kubectl: %w: %s", err, stderr)
	}
	return nil
}

func copyTree(src, dest string) error {
	if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dest, rel), 0o750)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFile(path, filepath.Join(dest, rel))
	})
}

// copyFile copies one of the cluster's log or configuration files into the export directory.
func copyFile(src, dest string) error {
	in, err := os.Open(src) //nolint:gosec // G304: a file of the cluster's own state directory
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }() // read only
	if err := os.MkdirAll(filepath.Dir(dest), 0o750); err != nil {
		return err
	}
	out, err := os.OpenFile(dest, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600) //nolint:gosec // G304: a file in the export directory the user chose
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close() // the copy's error is the one to report
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return out.Close()
}
