package kind

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// DefaultConfigFile is the cluster configuration used unless CreateWithConfig names another,
// relative to the workspace root.
const DefaultConfigFile = "kind/cluster.yaml"

// Patches for the host quirks kind/README.md describes. Each is applied only where the
// host has the quirk; an ordinary Docker host (a laptop, a CI runner) gets none.
const (
	// kubelet ≥ 1.35 refuses cgroup v1 unless told otherwise.
	cgroupV1Patch = "kind: KubeletConfiguration\nfailCgroupV1: false\n"
	// runc in the node cannot lower oom_score_adj below 0 on hosts that forbid it even to
	// root; containerd then must not ask it to.
	oomScorePatch = "[plugins.\"io.containerd.grpc.v1.cri\"]\n  restrict_oom_score_adj = true\n"
)

// clusterConfig is the kind configuration for this host and the quirks it works around.
type clusterConfig struct {
	cluster *v1alpha4.Cluster
	quirks  []string
}

// hostConfig reads the cluster configuration and adds the patches this host needs. It fails,
// naming the cause and the fix, when privileged containers cannot start here.
func (p *Provider) hostConfig(ctx context.Context) (*clusterConfig, error) {
	file := p.configFile
	if file == "" {
		root, err := workspace.Root()
		if err != nil {
			return nil, fmt.Errorf("locating %s: %w", DefaultConfigFile, err)
		}
		file = filepath.Join(root, DefaultConfigFile)
	}
	c, err := loadClusterConfig(file)
	if err != nil {
		return nil, err
	}
	if err := privilegedContainersStart(ctx, p.nodeImage); err != nil {
		return nil, err
	}
	cfg := &clusterConfig{cluster: c}
	if v, err := docker(ctx, "info", "--format", "{{.CgroupVersion}}"); err != nil {
		return nil, err
	} else if strings.TrimSpace(v) == "1" {
		c.KubeadmConfigPatches = append(c.KubeadmConfigPatches, cgroupV1Patch)
		cfg.quirks = append(cfg.quirks, "cgroup v1: kubelet runs with failCgroupV1: false")
	}
	if !canLowerOOMScore() {
		c.ContainerdConfigPatches = append(c.ContainerdConfigPatches, oomScorePatch)
		cfg.quirks = append(cfg.quirks, "oom_score_adj cannot go below 0: containerd runs with restrict_oom_score_adj = true")
	}
	return cfg, nil
}

// loadClusterConfig reads a kind v1alpha4 Cluster, rejecting unknown fields.
func loadClusterConfig(file string) (*v1alpha4.Cluster, error) {
	raw, err := os.ReadFile(file) //nolint:gosec // G304: the cluster configuration the user passed (--config)
	if err != nil {
		return nil, fmt.Errorf("reading kind cluster configuration: %w", err)
	}
	c := &v1alpha4.Cluster{}
	if err := yaml.UnmarshalStrict(raw, c); err != nil {
		return nil, fmt.Errorf("kind cluster configuration %s: %w", file, err)
	}
	v1alpha4.SetDefaultsCluster(c) // fills the Service and pod ranges the network fence needs
	if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
		return nil, fmt.Errorf("kind cluster configuration %s: want kind: Cluster, apiVersion: kind.x-k8s.io/v1alpha4; got kind %q, apiVersion %q", file, c.Kind, c.APIVersion)
	}
	return c, nil
}

// dockerReachable fails with what to do when there is no Docker daemon to talk to.
func dockerReachable(ctx context.Context) error {
	if _, err := exec.LookPath("docker"); err != nil {
		return fmt.Errorf("the kind provider needs Docker: no docker command on PATH (install Docker, or use PROVIDER=local)")
	}
	if _, err := docker(ctx, "version", "--format", "{{.Server.Version}}"); err != nil {
		return fmt.Errorf("the kind provider needs a running Docker daemon: %w (start it, e.g. `systemctl start docker`, or use PROVIDER=local)", err)
	}
	return nil
}

// privilegedContainersStart checks that the node image is here and that kind's nodes
// (privileged containers) can start on this host.
func privilegedContainersStart(ctx context.Context, image string) error {
	if _, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", image); err != nil {
		return fmt.Errorf("node image %s is not in Docker: build it with `make kind-node-image K8S_VERSION=…`, or for %s=%s pull or load it first (%w)", image, NodeImageEnv, image, err)
	}
	_, err := docker(ctx, "run", "--rm", "--pull=never", "--privileged", "--entrypoint", "/bin/true", image)
	if err == nil {
		return nil
	}
	cause := "see Docker's error above"
	if bnd, ok := capabilityBoundingSet(); ok && bnd&(1<<capSysResource) == 0 && strings.Contains(err.Error(), "unable to apply caps") {
		cause = "this host's capability bounding set lacks CAP_SYS_RESOURCE, which Docker grants every privileged container"
	}
	return fmt.Errorf("privileged containers cannot start on this host, and every kind node is one: %w\n"+
		"cause: %s\nfix: `make kind-host-setup` installs a runtime wrapper for Docker (undo with `make kind-host-restore`)", err, cause)
}

const capSysResource = 24

// capabilityBoundingSet reads CapBnd of this process.
func capabilityBoundingSet() (uint64, bool) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			var bnd uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%x", &bnd); err == nil {
				return bnd, true
			}
		}
	}
	return 0, false
}

// canLowerOOMScore says whether a process may set a negative oom_score_adj (what kubelet asks
// of runc for itself and for system pods).
func canLowerOOMScore() bool {
	return exec.Command("/bin/sh", "-c", "echo -998 > /proc/self/oom_score_adj").Run() == nil
}

// docker runs a docker command and returns its stdout; the error carries stderr.
func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...) //nolint:gosec // G204: docker with the arguments its callers in this package build
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// containersOf lists the containers kind made for cluster name, running or not.
func containersOf(name string) ([]string, error) {
	out, err := docker(context.Background(), "ps", "-a", "--filter", "label=io.x-k8s.kind.cluster="+name, "--format", "{{.Names}}")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}
