package suite

import (
	"context"
	"fmt"
	"io"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// PreparedTarget is a target rendered for one certificate mode with its images built, before any
// cluster exists: what a cluster must run (Images) and what InstallOn installs into it, the way
// a suite installing the target does. Tools that make their own clusters (the latency bench's
// A/B run of two versions) use it, so a target is installed in one way only.
type PreparedTarget struct {
	// Target is the description it was prepared from, and Mode its certificate mode.
	Target *target.Target
	Mode   string
	// Images are the images the rendered chart runs, each with its programs at the paths the
	// chart's containers name (cluster.Request.Images).
	Images map[string]cluster.Image

	rendered *rendered
}

// PrepareTarget builds t's images and renders its chart in mode ("": the first mode it declares)
// with values merged over the mode's own, for a cluster of Kubernetes kubeVersion.
func PrepareTarget(ctx context.Context, t *target.Target, mode string, values map[string]any, kubeVersion string, progress io.Writer) (*PreparedTarget, error) {
	declared := t.CertModes.Declared()
	if mode == "" && len(declared) > 0 {
		mode = declared[0]
	}
	if t.CertModes.Mode(mode) == nil {
		return nil, fmt.Errorf("target %s does not declare certificate mode %q (it declares %v)", t.Name, mode, declared)
	}
	images, err := t.Images(ctx, progress)
	if err != nil {
		return nil, err
	}
	r, err := render(ctx, t, mode, kubeVersion, values)
	if err != nil {
		return nil, err
	}
	if images, err = t.Entrypoints(images, r.objs); err != nil {
		return nil, err
	}
	return &PreparedTarget{Target: t, Mode: mode, Images: images, rendered: r}, nil
}

// InstallOn installs the prepared target into the cluster kubeconfig points at (named name in
// errors and progress), as a suite does: the release namespace, the mode's setup objects, the
// chart, the wait for the Deployment behind the webhook Service, then the target's setup
// objects. It returns what the target serves there.
func (p *PreparedTarget) InstallOn(ctx context.Context, name, kubeconfig string, logf func(string, ...any)) (*target.Installed, error) {
	c, err := newCluster(name, "", "", &cluster.Handle{Kubeconfig: kubeconfig}, logf)
	if err != nil {
		return nil, err
	}
	return installTarget(ctx, c, p.Target, p.Mode, p.rendered)
}
