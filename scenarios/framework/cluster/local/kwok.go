package local

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// kwokctl runs the control plane: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler as host processes (`--runtime binary`) from our own binaries. It generates the
// PKI and kubeconfig, starts the processes in order, keeps pid and log files, and kills them
// on delete. kwok-controller (which would fake every pod) is disabled: our node agent runs pods.
type kwokctl struct {
	bin    string
	layout layout
	// kubectl is put first on PATH: kwokctl execs the first kubectl it finds.
	kubectlDir string
}

func newKwokctl(cfg *Config, l layout) *kwokctl {
	return &kwokctl{bin: cfg.Binaries.Kwokctl, layout: l, kubectlDir: filepath.Dir(cfg.Binaries.Kubectl)}
}

// kwokConfig is the subset of kwok's KwokctlConfiguration (config.kwok.x-k8s.io/v1alpha1) we set.
type kwokConfig struct {
	APIVersion        string             `json:"apiVersion"`
	Kind              string             `json:"kind"`
	Options           kwokOptions        `json:"options"`
	ComponentsPatches []kwokComponentFix `json:"componentsPatches"`
}

type kwokOptions struct {
	Runtime                     string   `json:"runtime"`
	BindAddress                 string   `json:"bindAddress"`
	KubeVersion                 string   `json:"kubeVersion"`
	KubeAPIServerPort           int      `json:"kubeApiserverPort"`
	EtcdPort                    int      `json:"etcdPort"`
	EtcdPeerPort                int      `json:"etcdPeerPort"`
	KubeControllerManagerPort   int      `json:"kubeControllerManagerPort"`
	KubeSchedulerPort           int      `json:"kubeSchedulerPort"`
	EtcdBinary                  string   `json:"etcdBinary"`
	KubeAPIServerBinary         string   `json:"kubeApiserverBinary"`
	KubeControllerManagerBinary string   `json:"kubeControllerManagerBinary"`
	KubeSchedulerBinary         string   `json:"kubeSchedulerBinary"`
	KubectlBinary               string   `json:"kubectlBinary"`
	CacheDir                    string   `json:"cacheDir"`
	KubeAuthorization           bool     `json:"kubeAuthorization"`
	KubeAdmission               bool     `json:"kubeAdmission"`
	KubeAPIServerCertSANs       []string `json:"kubeApiserverCertSANs"`
	Disable                     []string `json:"disable"`
}

type kwokComponentFix struct {
	Name      string    `json:"name"`
	ExtraArgs []kwokArg `json:"extraArgs"`
}

type kwokArg struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Override bool   `json:"override,omitempty"`
}

// renderKwokConfig writes the kwokctl configuration for cfg. The extra arguments are the
// verified recipe: a loopback service range for apiserver and controller-manager (Services are
// dialable at ClusterIP:port on this host), advertise-address 127.0.0.1 and no endpoint
// reconciler (hosts without a default route). Pods reach the apiserver at the pod network's host
// address (the node agent forwards it to 127.0.0.1), which the serving certificate names. The
// apiserver authenticates to the node agent's kubelet endpoint with the admin certificate.
func renderKwokConfig(cfg *Config, l layout) ([]byte, error) {
	kc := kwokConfig{
		APIVersion: "config.kwok.x-k8s.io/v1alpha1",
		Kind:       "KwokctlConfiguration",
		Options: kwokOptions{
			Runtime:                     "binary",
			BindAddress:                 "127.0.0.1",
			KubeVersion:                 cfg.KubernetesVersion,
			KubeAPIServerPort:           cfg.Ports.APIServer,
			EtcdPort:                    cfg.Ports.Etcd,
			EtcdPeerPort:                cfg.Ports.EtcdPeer,
			KubeControllerManagerPort:   cfg.Ports.ControllerManager,
			KubeSchedulerPort:           cfg.Ports.Scheduler,
			EtcdBinary:                  cfg.Binaries.Etcd,
			KubeAPIServerBinary:         cfg.Binaries.KubeAPIServer,
			KubeControllerManagerBinary: cfg.Binaries.KubeControllerManager,
			KubeSchedulerBinary:         cfg.Binaries.KubeScheduler,
			KubectlBinary:               cfg.Binaries.Kubectl,
			CacheDir:                    filepath.Join(l.kwokWorkdir(), "cache"),
			KubeAuthorization:           true,
			KubeAdmission:               true,
			KubeAPIServerCertSANs:       []string{cfg.PodHostIP()},
			Disable:                     []string{"kwok-controller"},
		},
		ComponentsPatches: []kwokComponentFix{
			{Name: "kube-apiserver", ExtraArgs: []kwokArg{
				{Key: "service-cluster-ip-range", Value: cfg.ServiceCIDR},
				{Key: "advertise-address", Value: "127.0.0.1"},
				{Key: "endpoint-reconciler-type", Value: "none"},
				{Key: "kubelet-client-certificate", Value: l.kubeletClientCert()},
				{Key: "kubelet-client-key", Value: l.kubeletClientKey()},
			}},
			{Name: "kube-controller-manager", ExtraArgs: []kwokArg{
				{Key: "service-cluster-ip-range", Value: cfg.ServiceCIDR},
			}},
		},
	}
	return yaml.Marshal(kc)
}

func (k *kwokctl) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, k.bin, args...) //nolint:gosec // G204: the kwokctl gauntlet built, with the arguments this file passes
	cmd.Env = append(os.Environ(),
		"KWOK_WORKDIR="+k.layout.kwokWorkdir(),
		"PATH="+k.kubectlDir+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args, " "), err, kwokMessages(out.String()))
	}
	return nil
}

// kwokMessages shortens kwokctl's JSON log lines to their messages and errors.
func kwokMessages(out string) string {
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var entry struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Err   string `json:"err"`
		}
		if yaml.Unmarshal([]byte(line), &entry) == nil && entry.Msg != "" {
			line = entry.Level + " " + entry.Msg
			if entry.Err != "" {
				line += ": " + entry.Err
			}
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// create starts the control plane and returns once its processes run (not yet ready).
func (k *kwokctl) create(ctx context.Context) error {
	return k.run(ctx, "create", "cluster", "--name", k.layout.name,
		"--config", k.layout.kwokConfig(), "--kubeconfig", k.layout.kubeconfig())
}

// delete kills the control plane processes and waits until they are gone: kwokctl signals
// processes it did not start as children, so it cannot wait for them itself.
func (k *kwokctl) delete(ctx context.Context) error {
	pids := k.pids()
	if err := k.run(ctx, "delete", "cluster", "--name", k.layout.name, "--kubeconfig", k.layout.kubeconfig()); err != nil {
		return err
	}
	var alive []string
	for name, pid := range pids {
		if !waitGone(ctx, pid.pid, pid.exe, 10*time.Second) {
			alive = append(alive, fmt.Sprintf("%s (pid %d)", name, pid.pid))
		}
	}
	if len(alive) > 0 {
		return fmt.Errorf("deleting control plane: still running after kwokctl delete: %s", strings.Join(alive, ", "))
	}
	return nil
}

type kwokPid struct {
	pid int
	exe string
}

// pids reads kwokctl's pid files (one per component).
func (k *kwokctl) pids() map[string]kwokPid {
	out := map[string]kwokPid{}
	entries, _ := os.ReadDir(filepath.Join(k.layout.kwokCluster(), "pids"))
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".pid")
		raw, err := os.ReadFile(filepath.Join(k.layout.kwokCluster(), "pids", e.Name()))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			continue
		}
		out[name] = kwokPid{pid: pid, exe: filepath.Join(k.layout.kwokCluster(), "bin", name)}
	}
	return out
}

// logFiles lists the control plane's log files by component.
func (k *kwokctl) logFiles() map[string]string {
	out := map[string]string{}
	dir := filepath.Join(k.layout.kwokCluster(), "logs")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			out[strings.TrimSuffix(e.Name(), ".log")] = filepath.Join(dir, e.Name())
		}
	}
	return out
}
