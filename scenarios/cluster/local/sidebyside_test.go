package local_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gauntlet-dev/gauntlet/scenarios/cluster/local"
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
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
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
		if !nodeReady(node) {
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

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// testWriter sends provider progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
