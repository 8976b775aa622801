package local

import (
	"context"
	"fmt"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// startCertManager installs cert-manager's CRDs and starts gauntlet-cert-manager; its informers
// sync while the node starts.
func (p *Provider) startCertManager(ctx context.Context, cfg *Config, c *clusterClient, l layout) error {
	root, err := workspace.Root()
	if err != nil {
		return fmt.Errorf("locating cert-manager CRDs: %w", err)
	}
	dir, err := certmanager.CRDDir(ctx, root)
	if err != nil {
		return err
	}
	if err := certmanager.InstallCRDs(ctx, c.rest, dir); err != nil {
		return err
	}
	return certManagerDaemon(cfg, l).start()
}

// waitCertManager waits until a self-signed probe Issuer is Ready, i.e. the controllers run.
func (p *Provider) waitCertManager(ctx context.Context, cfg *Config, c *clusterClient, l layout) error {
	err := certmanager.WaitReady(ctx, c.rest, cfg.CertManager.Namespace, 60*time.Second)
	return withLog(err, certManagerDaemon(cfg, l).logFile)
}
