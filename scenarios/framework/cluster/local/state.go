package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// StateRoot is the directory holding one subdirectory per local cluster:
// $GAUNTLET_STATE, else <cache>/clusters.
func StateRoot() string {
	if d := os.Getenv("GAUNTLET_STATE"); d != "" {
		return d
	}
	return filepath.Join(workspace.CacheDir(), "clusters")
}

// layout names every file of one cluster's state directory.
type layout struct{ dir, name string }

func newLayout(name string) layout { return layout{dir: filepath.Join(StateRoot(), name), name: name} }

func (l layout) config() string      { return filepath.Join(l.dir, "cluster.yaml") }
func (l layout) kubeconfig() string  { return filepath.Join(l.dir, "kubeconfig.yaml") }
func (l layout) kwokConfig() string  { return filepath.Join(l.dir, "kwokctl.yaml") }
func (l layout) kwokWorkdir() string { return filepath.Join(l.dir, "kwok") }
func (l layout) kwokCluster() string { return filepath.Join(l.kwokWorkdir(), "clusters", l.name) }
func (l layout) pki() string         { return filepath.Join(l.kwokCluster(), "pki") }
func (l layout) images() string      { return filepath.Join(l.dir, "images.json") }
func (l layout) nodeState() string   { return filepath.Join(l.dir, "node") }
func (l layout) logs() string        { return filepath.Join(l.dir, "logs") }
func (l layout) pids() string        { return filepath.Join(l.dir, "pids") }

// kubeletClientCert and kubeletClientKey are what kube-apiserver authenticates to the node's
// kubelet API with (the admin certificate, which the node checks against the cluster's CA).
func (l layout) kubeletClientCert() string { return filepath.Join(l.pki(), "admin.crt") }
func (l layout) kubeletClientKey() string  { return filepath.Join(l.pki(), "admin.key") }

// kubeletServingCert is the self-signed certificate the node serves its kubelet API with
// (procnode's CONTRACT.md, "State dir layout"), rewritten at each start of the node.
func (l layout) kubeletServingCert() string {
	return filepath.Join(l.nodeState(), "kubelet", "tls.crt")
}

// existingConfigs reads the configuration of every cluster under StateRoot, so that a new
// cluster's derived ports and ranges avoid theirs.
func existingConfigs() ([]*Config, error) {
	entries, err := os.ReadDir(StateRoot())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing clusters in %s: %w", StateRoot(), err)
	}
	var out []*Config
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		cfg, err := LoadConfig(newLayout(e.Name()).config())
		if err != nil {
			continue // a half-created cluster without a config holds no ports worth avoiding
		}
		out = append(out, cfg)
	}
	return out, nil
}

// Clusters lists the names of the local clusters that have state on this machine.
func Clusters() ([]string, error) {
	cfgs, err := existingConfigs()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(cfgs))
	for _, c := range cfgs {
		names = append(names, c.Name)
	}
	return names, nil
}
