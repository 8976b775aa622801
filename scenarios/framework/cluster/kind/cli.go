package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

// commandLine is what gauntlet-cluster does with kind clusters.
type commandLine struct{}

// named is the provider of the kind cluster called name.
func named(name string) *Provider {
	p := NewProvider()
	p.name = name
	return p
}

// Up creates a kind cluster (the offline node image is built when missing) and prints how to
// use it.
func (commandLine) Up(ctx context.Context, req cluster.UpRequest) error {
	if req.WithoutNode || req.RetainOnFailure {
		return fmt.Errorf("--no-node and --retain are flags of the local provider")
	}
	p := named(req.Name)
	p.WithOpts(WithProgress(req.Out))
	if img := os.Getenv(NodeImageEnv); img != "" {
		p.WithOpts(WithNodeImage(img))
	}
	if req.CertManager {
		p.WithOpts(WithCertManager())
	}
	kubeconfig, err := req.Create(ctx, p)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(req.Out, `
Kubeconfig: %s
Try:
  export KUBECONFIG=%[1]s
  kubectl get nodes,pods -A
Logs:   make cluster-logs PROVIDER=kind CLUSTER=%[2]s
Delete: make cluster-down PROVIDER=kind CLUSTER=%[2]s
`, kubeconfig, req.Name)
	return err
}

// Down deletes the cluster's node containers and state.
func (commandLine) Down(ctx context.Context, name string, out io.Writer) error {
	p := named(name)
	if exists, err := p.Exists(); err != nil || !exists {
		_, _ = fmt.Fprintf(out, "No kind cluster %q.\n", name)
		return err
	}
	if err := p.Destroy(ctx); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "Deleted kind cluster %q.\n", name)
	return err
}

// ExportLogs copies what `kind export logs` collects into dir.
func (commandLine) ExportLogs(ctx context.Context, name, dir string) error {
	return named(name).ExportLogs(ctx, dir)
}

// List names the kind clusters on this host.
func (commandLine) List() ([]string, error) { return NewProvider().List() }

// LoadImages copies images into every node of the cluster, as `kind load docker-image` does.
func (commandLine) LoadImages(ctx context.Context, name string, images []string, out io.Writer) error {
	if len(images) == 0 {
		return fmt.Errorf("load needs at least one image, e.g. gauntlet-cluster load --provider kind --name %s dynamo-operator:dev", name)
	}
	p := named(name)
	if exists, err := p.Exists(); err != nil || !exists {
		return errors.Join(err, fmt.Errorf("no kind cluster %q", name))
	}
	if err := p.LoadImages(ctx, images...); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "Loaded %s into kind cluster %q.\n", strings.Join(images, ", "), name)
	return err
}
