package local_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/local"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
)

// TestSecondClusterSideBySide creates a second cluster (defaults: control plane and node)
// while the suite's cluster runs, reports how long it took to become ready from warm
// binaries, checks both answer on their own ports and ranges, then deletes it and checks that
// nothing is left: no process, mount, listener, interface or state directory.
func TestSecondClusterSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: brings up a local cluster (etcd, apiserver, node); run without -short")
	}
	ctx := context.Background()
	second := local.NewProvider()
	second.WithName(clusterName + "-b").WithOpts(local.WithProgress(testWriter{t}))
	t.Cleanup(func() { _ = second.Destroy(context.Background()) })
	// Through a config file, as `gauntlet-cluster up --config` and CreateClusterWithConfig do.
	configFile := filepath.Join(t.TempDir(), "cluster.yaml")
	config := "apiVersion: gauntlet.dev/v1alpha1\nkind: LocalCluster\nname: " + clusterName + "-b\n"
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := second.CreateWithConfig(ctx, configFile); err != nil {
		t.Fatalf("creating a second cluster next to %q: %v", clusterName, err)
	}
	if err := second.WaitForControlPlane(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("second local cluster ready in %.1fs from warm binaries (target ≤ 10s on 2 cores)", second.ReadyIn().Seconds())

	a, err := provider.Config()
	if err != nil {
		t.Fatal(err)
	}
	b, err := second.Config()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Conflicts([]*local.Config{a}); err != nil {
		t.Fatalf("the two clusters share settings: %v", err)
	}
	for _, p := range []*local.Provider{provider, second} {
		kube, err := kubernetes.NewForConfig(p.KubernetesRestConfig())
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := p.Config()
		svc, err := kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("cluster %s: %v", cfg.Name, err)
		}
		if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !netip.MustParsePrefix(cfg.ServiceCIDR).Contains(ip) {
			t.Fatalf("cluster %s: kubernetes Service has ClusterIP %s outside %s", cfg.Name, svc.Spec.ClusterIP, cfg.ServiceCIDR)
		}
		node, err := kube.CoreV1().Nodes().Get(ctx, cfg.NodeName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("cluster %s has no node %s: %v", cfg.Name, cfg.NodeName(), err)
		}
		if !cluster.NodeReady(node) {
			t.Fatalf("cluster %s: node %s not Ready", cfg.Name, node.Name)
		}
	}

	t0 := time.Now()
	if err := second.Destroy(ctx); err != nil {
		t.Fatalf("deleting the second cluster: %v", err)
	}
	t.Logf("second cluster deleted in %.1fs", time.Since(t0).Seconds())
	if left := local.Leftovers(b); len(left) > 0 {
		t.Fatalf("deleting cluster %s left behind:\n  %s", b.Name, strings.Join(left, "\n  "))
	}
	if _, err := os.Stat(provider.GetKubeconfig()); err != nil {
		t.Fatalf("deleting the second cluster touched the first: %v", err)
	}
}

// testWriter sends provider progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestDeleteAfterTheNodeWasKilled kills a cluster's node agent (SIGKILL: no cleanup) while a
// pod has a volume at a path the host did not have, checks that the leftover check sees what
// the agent left (its links and the mount target), then deletes the cluster and checks that
// nothing is left, /run's mount target registry included.
func TestDeleteAfterTheNodeWasKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: brings up a local cluster (etcd, apiserver, node); run without -short")
	}
	ctx := context.Background()
	name := clusterName + "-k"
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	p := local.NewProvider()
	p.WithName(name).WithOpts(local.WithProgress(testWriter{t}), local.WithImages(map[string]procnode.Image{"gauntlet.dev/sleep": {Binary: sleep}}))
	t.Cleanup(func() { _ = p.Destroy(context.Background()) })
	_, err = p.Create(ctx)
	require.NoError(t, err)
	require.NoError(t, p.WaitForControlPlane(ctx, nil))
	cfg, err := p.Config()
	require.NoError(t, err)

	target := filepath.Join(t.TempDir(), "not-on-the-host", "data")
	kube, err := kubernetes.NewForConfig(p.KubernetesRestConfig())
	require.NoError(t, err)
	_, err = kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "holds-a-mount-target"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "sleep", Image: "gauntlet.dev/sleep:1", Args: []string{"3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: target}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, poll.Until(ctx, "the pod to run and its mount target to exist on the host", time.Minute, func(ctx context.Context) (bool, string, error) {
		pod, err := kube.CoreV1().Pods("default").Get(ctx, "holds-a-mount-target", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		_, statErr := os.Stat(target)
		return pod.Status.Phase == corev1.PodRunning && statErr == nil, fmt.Sprintf("phase %s, target: %v", pod.Status.Phase, statErr), nil
	}))

	pid, err := os.ReadFile(filepath.Join(local.StateRoot(), name, "pids", "gauntlet-node.pid"))
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(string(pid)))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(n, syscall.SIGKILL))
	// Delete a node that is dead, not one still exiting: until the kernel has torn it down it
	// looks alive, and Delete would stop it as a running node that left its mounts behind.
	require.NoError(t, poll.Until(ctx, "the killed node to be gone", 10*time.Second, func(context.Context) (bool, string, error) {
		_, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", n))
		return err != nil, "pid " + strconv.Itoa(n) + " still runs", nil
	}))
	require.NoError(t, poll.Until(ctx, "the killed node's leftovers to show", 10*time.Second, func(context.Context) (bool, string, error) {
		left := strings.Join(local.Leftovers(cfg), "\n")
		return strings.Contains(left, "mount target "+filepath.Dir(target)) && strings.Contains(left, "network interface "+procnode.BridgeName(cfg.NodeName())),
			left, nil
	}), "the leftover check must see the links and mount targets of a killed node")

	require.NoError(t, p.Destroy(ctx), "deleting a cluster whose node was killed")
	assert.Empty(t, local.Leftovers(cfg), "after deleting the cluster")
	assert.NoDirExists(t, filepath.Dir(target), "the mount target the killed node created")
}
