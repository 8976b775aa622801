package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestControlPlaneAssetsPrefersKubebuilderAssets(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "etcd"), nil, 0o600); err != nil { // only its presence is checked
		t.Fatal(err)
	}
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	if got, err := ControlPlaneAssets("etcd"); err != nil || got != dir {
		t.Errorf("expected %s, saw %q, %v", dir, got, err)
	}
	_, err := ControlPlaneAssets("etcd", "kube-apiserver")
	if err == nil || !strings.Contains(err.Error(), "control-plane binary kube-apiserver not found in "+dir) {
		t.Errorf("expected the missing kube-apiserver named, saw %v", err)
	}
}

func TestControlPlaneAssetsDefaultsToTheCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("GAUNTLET_CACHE", cache)
	want := filepath.Join(cache, "k8s", KubernetesVersion, "bin")
	if got := ControlPlaneDir(KubernetesVersion); got != want {
		t.Errorf("ControlPlaneDir: expected %s, saw %s", want, got)
	}
	if _, err := ControlPlaneAssets("etcd"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("expected an error naming %s, saw %v", want, err)
	}
}
