package cluster_test

import (
	"fmt"
	"go/ast"
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
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// workspaceModule is the import path of the workspace's root; a module's packages are below it
// as they are below the workspace's directory.
const workspaceModule = "github.com/gauntlet-dev/gauntlet/"

// A decision that depends on the provider belongs to the provider, as a field of what it
// registers: a package that compares a provider's name breaks for the next provider.
func TestOnlyTheProvidersCompareProviderNames(t *testing.T) {
	root, err := workspace.Root()
	require.NoError(t, err)
	files := map[string]*ast.File{}
	fset := token.NewFileSet()
	for _, module := range []string{"scenarios", "e2e"} {
		err := filepath.WalkDir(filepath.Join(root, module), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			files[filepath.ToSlash(rel)], err = parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			return err
		})
		require.NoError(t, err)
	}
	assert.Empty(t, providerNameComparisons(fset, files, cluster.Names()),
		"compare no provider name outside scenarios/framework/cluster/<provider>: give cluster.Provider a field that says what the caller needs to know")
}

func TestProviderNameComparisonsAreFound(t *testing.T) {
	src := map[string]string{
		"scenarios/framework/cluster/kind/register.go": `package kind
const ProviderName = "kind"
func own(p string) bool { return p == ProviderName }`,
		"scenarios/framework/suite/providers.go": `package suite
import "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/kind"
const DefaultProvider = "local"
func a(p string) bool { return p == "kind" }
func b(p string) bool { return DefaultProvider != p }
func c(p string) bool { return p == kind.ProviderName }
func d(p string) int { switch p { case "existing": return 1 }; return 0 }
func e(k string) bool { return k == "Pod" || k == "kindred" }`,
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for path, s := range src {
		f, err := parser.ParseFile(fset, path, s, parser.SkipObjectResolution)
		require.NoError(t, err)
		files[path] = f
	}
	assert.Equal(t, []string{
		`scenarios/framework/suite/providers.go:4:32: p == "kind"`,
		`scenarios/framework/suite/providers.go:5:32: DefaultProvider != p`,
		`scenarios/framework/suite/providers.go:6:32: p == kind.ProviderName`,
		`scenarios/framework/suite/providers.go:7:40: case "existing"`,
	}, providerNameComparisons(fset, files, []string{"existing", "kind", "local"}))
}

// providerNameComparisons lists the ==, != and switch cases, outside the providers' own
// packages (scenarios/framework/cluster/<name>/…), with a provider's name on one side: a string literal,
// or a constant the workspace declares with such a literal.
func providerNameComparisons(fset *token.FileSet, files map[string]*ast.File, providers []string) []string {
	isName := func(lit ast.Expr) bool {
		b, ok := lit.(*ast.BasicLit)
		if !ok || b.Kind != token.STRING {
			return false
		}
		s, err := strconv.Unquote(b.Value)
		return err == nil && slices.Contains(providers, s)
	}
	// constants holds "<package directory>.<name>" of every constant declared as a name.
	constants := map[string]bool{}
	for path, f := range files {
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, spec := range g.Specs {
					v := spec.(*ast.ValueSpec)
					for i, n := range v.Names {
						if i < len(v.Values) && isName(v.Values[i]) {
							constants[filepath.ToSlash(filepath.Dir(path))+"."+n.Name] = true
						}
					}
				}
			}
		}
	}
	var found []string
	for path, f := range files {
		if slices.ContainsFunc(providers, func(p string) bool { return strings.HasPrefix(path, "scenarios/framework/cluster/"+p+"/") }) {
			continue
		}
		imports := map[string]string{} // the name a package is imported by → its directory
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			dir, ok := strings.CutPrefix(p, workspaceModule)
			if !ok {
				continue
			}
			name := filepath.Base(dir)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = dir
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		names := func(e ast.Expr) bool {
			switch e := e.(type) {
			case *ast.Ident:
				return constants[dir+"."+e.Name]
			case *ast.SelectorExpr:
				pkg, ok := e.X.(*ast.Ident)
				return ok && constants[imports[pkg.Name]+"."+e.Sel.Name]
			}
			return isName(e)
		}
		show := func(n ast.Node, text string) {
			pos := fset.Position(n.Pos())
			found = append(found, fmt.Sprintf("%s:%d:%d: %s", path, pos.Line, pos.Column, text))
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (names(n.X) || names(n.Y)) {
					show(n, source(n.X)+" "+n.Op.String()+" "+source(n.Y))
				}
			case *ast.CaseClause:
				for _, e := range n.List {
					if names(e) {
						show(e, "case "+source(e))
					}
				}
			}
			return true
		})
	}
	slices.Sort(found)
	return found
}

// source is a comparison's operand as written, for the message.
func source(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Value
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return source(e.X) + "." + e.Sel.Name
	case *ast.StarExpr:
		return "*" + source(e.X)
	}
	return fmt.Sprintf("%T", e)
}
