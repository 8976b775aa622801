package kind

import (
	"context"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// CertManagerNamespace is where the in-cluster cert-manager runs and keeps ClusterIssuer Secrets.
const CertManagerNamespace = "cert-manager"

// CertManagerImageRepository is the repository of the cert-manager image built from
// gauntlet-cert-manager; the tag is the binary's content hash.
const CertManagerImageRepository = "gauntlet.local/cert-manager"

// installCertManager builds the cert-manager image from the same code the local provider runs,
// loads it, installs the CRDs of the module in the build list and starts the Deployments.
func (p *Provider) installCertManager(ctx context.Context, rc *rest.Config) error {
	image, err := BuildCertManagerImage(ctx)
	if err != nil {
		return err
	}
	if err := p.LoadImages(ctx, image); err != nil {
		return err
	}
	root, err := workspace.Root()
	if err != nil {
		return err
	}
	dir, err := certmanager.CRDDir(ctx, root)
	if err != nil {
		return err
	}
	if err := certmanager.InstallCRDs(ctx, rc, dir); err != nil {
		return err
	}
	return certmanager.DeployInCluster(ctx, rc, CertManagerNamespace, image, 2*time.Minute)
}

// BuildCertManagerImage builds gauntlet-cert-manager statically into an image FROM scratch,
// CertManagerImageRepository:<the binary's content hash>, and returns its reference.
func BuildCertManagerImage(ctx context.Context) (string, error) {
	dir := filepath.Join(workspace.BinDir(), "images", "cert-manager")
	built, err := workspace.Build(ctx, dir, workspace.BuildOptions{Static: true}, workspace.CertManagerPackage)
	if err != nil {
		return "", err
	}
	binary := built[workspace.CertManagerPackage]
	sum, err := fileHash(binary)
	if err != nil {
		return "", err
	}
	ref := CertManagerImageRepository + ":" + sum[:12]
	return ref, BuildScratchImage(ctx, ref, cluster.Image{Binary: binary, Entrypoint: "/" + filepath.Base(binary)})
}
