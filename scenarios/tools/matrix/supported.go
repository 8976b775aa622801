package matrix

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Providers a matrix runs on: the two that bring their own cluster of a given version.
var Providers = []string{"local", "kind"}

// ControlPlaneModules holds one tools module per Kubernetes version the control plane and kind
// node images are built from: hack/tools/k8s/<version>/go.mod.
const ControlPlaneModules = "hack/tools/k8s"

// AddVersionHint says how to support another Kubernetes version.
const AddVersionHint = "add a version the Go module proxy serves with hack/add-k8s-version.sh <version>"

// SupportedIn reads what the workspace at root supports: the Kubernetes versions it has a
// control-plane module for (oldest first), the providers, and the suites (e2e/<suite>/main_test.go).
func SupportedIn(root string) (Supported, error) {
	mods, err := filepath.Glob(filepath.Join(root, ControlPlaneModules, "v*", "go.mod"))
	if err != nil {
		return Supported{}, err
	}
	var versions []string
	for _, m := range mods {
		versions = append(versions, filepath.Base(filepath.Dir(m)))
	}
	if len(versions) == 0 {
		return Supported{}, fmt.Errorf("no Kubernetes version is supported: %s holds no <version>/go.mod; %s", ControlPlaneModules, AddVersionHint)
	}
	slices.SortFunc(versions, func(a, b string) int {
		va, err := version.ParseSemantic(a)
		if err != nil {
			return strings.Compare(a, b)
		}
		if c, err := va.Compare(b); err == nil {
			return c
		}
		return strings.Compare(a, b)
	})
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
