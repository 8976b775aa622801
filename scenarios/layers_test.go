package scenarios_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers" // cluster.Names lists the providers linked in
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// The harness has three floors inside the scenarios module, and the benchmarks stand on the
// first one:
//   - scenarios/framework: suites, clusters and their providers, installs, reports;
//   - scenarios/catalog: the scenario packages, written against the framework;
//   - scenarios/tools: the commands, the matrix and mutation runners.
//
// A floor imports only the floors below it, and a scenario does not know how a provider runs
// pods: it asks the framework (suite, cluster) and runs on every provider.
const (
	workspaceModule = "github.com/gauntlet-dev/gauntlet/"
	framework       = "scenarios/framework/"
	catalog         = "scenarios/catalog/"
	tools           = "scenarios/tools/"
)

// operatorContracts are the operator module's packages the framework may import: the shapes the
// operator publishes for its users (the doctors' JSON report), not how it works.
var operatorContracts = []string{"operator/doctorreport/"}

// forbidden lists, for the directory dir (slash-separated, relative to the workspace), what it
// may not import (directories relative to the workspace), given the provider packages.
func forbidden(dir string, providerPackages []string) []string {
	switch {
	case strings.HasPrefix(dir+"/", framework):
		return []string{catalog, tools, "operator/"}
	case strings.HasPrefix(dir+"/", catalog):
		return append([]string{tools, "operator/"}, providerPackages...)
	case dir == "bench" || strings.HasPrefix(dir, "bench/"):
		return []string{catalog, tools}
	}
	return nil
}

// layerViolations lists "<file>: imports <package> (<rule>)" for every import of imports (file →
// the workspace directories it imports) that its directory's floor forbids.
func layerViolations(imports map[string][]string, providerPackages []string) []string {
	var found []string
	for file, imported := range imports {
		rules := forbidden(filepath.ToSlash(filepath.Dir(file)), providerPackages)
		for _, p := range imported {
			for _, rule := range rules {
				if strings.HasPrefix(p+"/", rule) && !slices.Contains(operatorContracts, p+"/") {
					found = append(found, fmt.Sprintf("%s: imports %s (a %s package may not import %s)", file, p, floorOf(file), strings.TrimSuffix(rule, "/")))
				}
			}
		}
	}
	slices.Sort(found)
	return found
}

func floorOf(file string) string {
	for _, f := range []string{framework, catalog, tools} {
		if strings.HasPrefix(file, f) {
			return strings.TrimSuffix(strings.TrimPrefix(f, "scenarios/"), "/")
		}
	}
	return strings.SplitN(file, "/", 2)[0]
}

// providerPackages are the directories that say how a cluster's pods run: each provider's own
// package, the package that links them all in, and the local provider's process node.
func providerPackages() []string {
	pkgs := []string{framework + "cluster/providers/", framework + "procnode/"}
	for _, name := range cluster.Names() {
		pkgs = append(pkgs, framework+"cluster/"+name+"/")
	}
	return pkgs
}

func TestEachFloorImportsOnlyTheFloorsBelowIt(t *testing.T) {
	root, err := workspace.Root()
	require.NoError(t, err)
	imports := map[string][]string{}
	fset := token.NewFileSet()
	for _, module := range []string{"scenarios", "bench"} {
		err := filepath.WalkDir(filepath.Join(root, module), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if dir, ok := strings.CutPrefix(p, workspaceModule); ok {
					imports[filepath.ToSlash(rel)] = append(imports[filepath.ToSlash(rel)], dir)
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, imports[catalog+"admission/graph.go"], "the walk found the catalog's imports")
	if found := layerViolations(imports, providerPackages()); len(found) > 0 {
		t.Errorf("imports across the floors:\n%s\nmove what both floors need down into scenarios/framework, or the check up into the catalog or the tools",
			strings.Join(found, "\n"))
	}
}

func TestLayerViolationsAreFound(t *testing.T) {
	providers := []string{framework + "cluster/local/", framework + "procnode/"}
	assert.Equal(t, []string{
		"bench/load.go: imports scenarios/catalog/admission (a bench package may not import scenarios/catalog)",
		"scenarios/catalog/leases/p5.go: imports scenarios/framework/cluster/local (a catalog package may not import scenarios/framework/cluster/local)",
		"scenarios/catalog/leases/p5.go: imports scenarios/framework/procnode (a catalog package may not import scenarios/framework/procnode)",
		"scenarios/framework/suite/x_test.go: imports scenarios/catalog/hostile (a framework package may not import scenarios/catalog)",
		"scenarios/framework/suite/y.go: imports operator/internal/doctor (a framework package may not import operator)",
		"scenarios/framework/suite/y.go: imports scenarios/tools/matrix (a framework package may not import scenarios/tools)",
	}, layerViolations(map[string][]string{
		"scenarios/framework/suite/x_test.go":   {"scenarios/framework/release", "scenarios/catalog/hostile"},
		"scenarios/framework/suite/y.go":        {"scenarios/tools/matrix", "operator/internal/doctor"},
		"scenarios/framework/doctor/z.go":       {"operator/doctorreport"},
		"scenarios/catalog/leases/p5.go":        {"scenarios/framework/cluster", "scenarios/framework/cluster/local", "scenarios/framework/procnode"},
		"scenarios/catalog/admission/a.go":      {"scenarios/framework/suite", "scenarios/catalog/hostile"},
		"scenarios/tools/cmd/gauntlet-e2e/m.go": {"scenarios/catalog/admission", "scenarios/framework/cluster/local"},
		"bench/load.go":                         {"scenarios/framework/release", "scenarios/catalog/admission"},
	}, providers))
}
