package existing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/steps"
)

// commandLine is what gauntlet-cluster does with the cluster KUBECONFIG names: it creates and
// deletes nothing, it checks the cluster as a suite would and reads its logs.
type commandLine struct{}

// Up checks the cluster as `make e2e PROVIDER=existing` does before a suite (it answers, it
// runs no Dynamo operator, cert-manager is ready when asked for) and says how to run a suite.
func (commandLine) Up(ctx context.Context, req cluster.UpRequest) error {
	if req.ConfigFile != "" || req.WithoutNode || req.RetainOnFailure {
		return errors.New("--config, --no-node and --retain configure a cluster the provider creates; the existing provider creates none")
	}
	kubeconfig, b, err := connectToKubeconfig()
	if err != nil {
		return err
	}
	pr := steps.New(req.Out)
	if err := pr.Step("Checking the existing cluster at "+kubeconfig, func() error { return checkUntouched(ctx, b.kube, b.installer) }); err != nil {
		return err
	}
	if req.CertManager {
		ns := certManagerNamespace()
		if err := pr.Step(checkingCertManager(ns), func() error {
			return errors.Join(certmanager.WaitReady(ctx, b.rest, ns, time.Minute), certmanager.DeleteProbe(ctx, b.rest, ns))
		}); err != nil {
			return fmt.Errorf("cert-manager on the existing cluster: %w (install cert-manager, or set %s)", err, CertManagerNamespaceEnv)
		}
	}
	_, err = fmt.Fprintf(req.Out, `
Kubeconfig: %s    (from KUBECONFIG; a suite can run on this cluster)
Try:
  kubectl get nodes,pods -A
  make e2e-auto-certs PROVIDER=existing IMAGE=<repository>:<tag of an operator image its nodes can pull>
Logs:   make cluster-logs PROVIDER=existing CLUSTER=%s     (every pod's log)
The existing provider deletes no cluster: a suite removes what it installed when it ends.
`, kubeconfig, req.Name)
	return err
}

// connectToKubeconfig connects to the cluster KUBECONFIG names.
func connectToKubeconfig() (string, *backend, error) {
	kubeconfig, err := kubeconfigPath()
	if err != nil {
		return "", nil, err
	}
	b, err := connect(kubeconfig)
	return kubeconfig, b, err
}

// Down deletes nothing: the cluster is not the provider's to delete.
func (commandLine) Down(_ context.Context, _ string, out io.Writer) error {
	_, err := fmt.Fprintln(out, "The existing provider deletes no cluster: the one KUBECONFIG names stays as it is (a suite removes what it installed when it ends).")
	return err
}

// ExportLogs writes every pod's current log into dir.
func (commandLine) ExportLogs(ctx context.Context, _ string, dir string) error {
	_, b, err := connectToKubeconfig()
	if err != nil {
		return err
	}
	return b.ExportLogs(ctx, dir)
}

// List names the cluster KUBECONFIG names by its kubeconfig file; none without KUBECONFIG.
func (commandLine) List() ([]string, error) {
	if os.Getenv("KUBECONFIG") == "" {
		return nil, nil
	}
	kubeconfig, err := kubeconfigPath()
	if err != nil {
		return nil, err
	}
	return []string{kubeconfig}, nil
}

// LoadImages refuses: the provider reaches the cluster through its API server only.
func (commandLine) LoadImages(context.Context, string, []string, io.Writer) error {
	return errors.New("the existing provider cannot copy images into a cluster's nodes (it reaches the cluster through its API server only): push the image where the nodes pull from, or preload it; for a kind cluster, use gauntlet-cluster load --provider kind")
}
