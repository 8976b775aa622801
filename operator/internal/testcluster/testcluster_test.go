package testcluster

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The envtest control plane is the default K8S_VERSION's: the newest module under hack/tools/k8s,
// which the Makefile and hack scripts default to.
func TestKubernetesVersionIsTheDefault(t *testing.T) {
	out, err := exec.Command(filepath.Join(RepoRoot(), "hack", "k8s-module.sh"), "--newest").Output() //nolint:gosec // G204: the repository's own script
	if err != nil {
		t.Fatalf("hack/k8s-module.sh --newest: %v", err)
	}
	if newest := strings.TrimSpace(string(out)); newest != KubernetesVersion {
		t.Errorf("testcluster.KubernetesVersion = %s, but the default K8S_VERSION (newest under hack/tools/k8s) is %s: update the constant", KubernetesVersion, newest)
	}
}
