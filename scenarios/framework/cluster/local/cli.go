package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

// commandLine is what gauntlet-cluster does with local clusters.
type commandLine struct{}

// named is the provider of the local cluster called name.
func named(name string) *Provider {
	p := NewProvider()
	p.WithName(name)
	return p
}

// Up creates the cluster and prints its kubeconfig, addresses and the commands to use it.
func (commandLine) Up(ctx context.Context, req cluster.UpRequest) error {
	opts := []Option{WithProgress(req.Out)}
	if req.CertManager {
		opts = append(opts, WithCertManager())
	}
	if req.WithoutNode {
		opts = append(opts, WithoutNode())
	}
	if req.RetainOnFailure {
		opts = append(opts, WithRetainOnFailure())
	}
	p := named(req.Name)
	p.WithOpts(opts...)
	kubeconfig, err := req.Create(ctx, p)
	if err != nil {
		return err
	}
	cfg, err := p.Config()
	if err != nil {
		return err
	}
	kubectl := "kubectl"
	if _, err := exec.LookPath("kubectl"); err != nil {
		kubectl = cfg.Binaries.Kubectl // the one built with the control plane
	}
	_, err = fmt.Fprintf(req.Out, `
Kubeconfig: %s
  API server   https://127.0.0.1:%d     services %s    pods %s
Try:
  export KUBECONFIG=%s
  %s get nodes,pods -A
Logs:   make cluster-logs CLUSTER=%[7]s     (gauntlet-cluster logs --name %[7]s)
Delete: make cluster-down CLUSTER=%[7]s     (gauntlet-cluster down --name %[7]s)
`, kubeconfig, cfg.Ports.APIServer, cfg.ServiceCIDR, cfg.PodCIDR, kubeconfig, kubectl, cfg.Name)
	return err
}

// Down deletes the cluster; with no cluster of that name it still cleans and checks the host,
// since an interrupted run may have left mounts or links.
func (commandLine) Down(ctx context.Context, name string, out io.Writer) error {
	if _, err := os.Stat(newLayout(name).dir); err != nil {
		names, _ := Clusters()
		_, _ = fmt.Fprintf(out, "No local cluster %q (clusters: %s).\n", name, orNone(names))
		left, err := CleanDeleted(name)
		if err != nil {
			return fmt.Errorf("checking what cluster %q left on this host: %w", name, err)
		}
		if len(left) > 0 {
			return fmt.Errorf("cluster %q left behind:\n  %s", name, strings.Join(left, "\n  "))
		}
		_, err = fmt.Fprintf(out, "✓ Nothing of cluster %q is left on this host (processes, mounts, mount targets, listeners, links, state).\n", name)
		return err
	}
	p := named(name)
	p.WithOpts(WithProgress(out))
	if err := p.Destroy(ctx); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "Deleted cluster %q.\n", name)
	return err
}

// ExportLogs copies the control plane's, the node's and every pod's logs into dir.
func (commandLine) ExportLogs(ctx context.Context, name, dir string) error {
	return named(name).ExportLogs(ctx, dir)
}

// List names the local clusters on this host.
func (commandLine) List() ([]string, error) { return Clusters() }

// LoadImages refuses: a local cluster's pods are host processes, not images.
func (commandLine) LoadImages(context.Context, string, []string, io.Writer) error {
	return fmt.Errorf("load copies images into kind nodes: use --provider=kind (a local cluster runs binaries, not images)")
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
