package kind

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// CertManagerNamespace is where the in-cluster cert-manager runs and keeps ClusterIssuer Secrets.
const CertManagerNamespace = "cert-manager"

// CertManagerImageRepository is the repository of the cert-manager image built from
// gauntlet-cert-manager; the tag is the binary's content hash.
const CertManagerImageRepository = "gauntlet.local/cert-manager"

// scratchDockerfile packages one static executable, as operator/Dockerfile does.
const scratchDockerfile = `FROM scratch
COPY %[1]s /%[1]s
USER 65532:65532
ENTRYPOINT ["/%[1]s"]
`

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

// BuildCertManagerImage builds gauntlet-cert-manager statically into an image FROM scratch and
// returns its reference.
func BuildCertManagerImage(ctx context.Context) (string, error) {
	dir := filepath.Join(workspace.BinDir(), "images", "cert-manager")
	built, err := workspace.Build(ctx, dir, workspace.BuildOptions{Static: true}, workspace.CertManagerPackage)
	if err != nil {
		return "", err
	}
	return buildScratchImage(ctx, CertManagerImageRepository, built[workspace.CertManagerPackage])
}

// buildScratchImage packages a static executable into repository:<content hash>, skipping the
// build when Docker has that image already.
func buildScratchImage(ctx context.Context, repository, binary string) (string, error) {
	sum, err := fileHash(binary)
	if err != nil {
		return "", err
	}
	ref := repository + ":" + sum[:12]
	if _, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", ref); err == nil {
		return ref, nil
	}
	dockerfile := filepath.Join(filepath.Dir(binary), "Dockerfile")
	if err := os.WriteFile(dockerfile, fmt.Appendf(nil, scratchDockerfile, filepath.Base(binary)), 0o600); err != nil {
		return "", err
	}
	return ref, BuildImage(ctx, ref, dockerfile, filepath.Dir(binary))
}

func fileHash(path string) (string, error) {
	f, err := os.Open(path) //nolint:gosec // G304: a binary gauntlet just built
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read only
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
