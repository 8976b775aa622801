package matrix

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
)

// Providers a matrix runs on: the two that bring their own cluster of a given version.
var Providers = []string{"local", "kind"}

// ControlPlaneModule is the tools module whose k8s.io/kubernetes requirement is the Kubernetes
// version the control-plane binaries and kind node images are built from.
const ControlPlaneModule = "hack/tools/k8s/go.mod"

// AddVersionHint says how to support another Kubernetes version.
const AddVersionHint = "the control plane and kind node images are built from " + ControlPlaneModule +
	": require that k8s.io/kubernetes version, replace its k8s.io/* staging modules with the matching v0.x, `go mod tidy` there, and lift the version check of hack/control-plane.sh and hack/kind-node-image.sh"

var kubernetesRequirement = regexp.MustCompile(`(?m)^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v\S+)`)

// SupportedIn reads what the workspace at root supports: the Kubernetes version its
// control-plane module builds, the providers, and the suites (e2e/<suite>/main_test.go).
func SupportedIn(root string) (Supported, error) {
	mod, err := os.ReadFile(filepath.Join(root, ControlPlaneModule)) //nolint:gosec // G304: a file of the workspace
	if err != nil {
		return Supported{}, fmt.Errorf("reading the supported Kubernetes version: %w", err)
	}
	var versions []string
	for _, m := range kubernetesRequirement.FindAllSubmatch(mod, -1) {
		versions = append(versions, string(m[1]))
	}
	if len(versions) == 0 {
		return Supported{}, fmt.Errorf("%s requires no k8s.io/kubernetes version", ControlPlaneModule)
	}
	mains, err := filepath.Glob(filepath.Join(root, "e2e", "*", "main_test.go"))
	if err != nil {
		return Supported{}, err
	}
	var suites []string
	for _, m := range mains {
		suites = append(suites, filepath.Base(filepath.Dir(m)))
	}
	slices.Sort(suites)
	return Supported{Versions: versions, Providers: slices.Clone(Providers), Suites: suites, AddVersion: AddVersionHint}, nil
}
