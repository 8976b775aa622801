package gomodule

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// ChartDir is the Helm chart directory rel (slash-separated, relative to the module's root, e.g.
// charts/gatekeeper) inside moduleDir, the directory Resolve returned. When rel holds no
// Chart.yaml, the error names the module and its version, rel, and the charts the module has.
func ChartDir(moduleDir, rel string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(rel))
	if rel == "" || !filepath.IsLocal(clean) {
		return "", fmt.Errorf("chart directory %q of %s must be a path inside the module, relative to its root (e.g. charts/name)", rel, moduleName(moduleDir))
	}
	dir := filepath.Join(moduleDir, clean)
	_, err := os.Stat(filepath.Join(dir, "Chart.yaml"))
	if err == nil {
		return dir, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("chart %s of %s: %w", rel, moduleName(moduleDir), err)
	}
	why := "has no directory " + filepath.ToSlash(clean)
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		why = "has no Chart.yaml in " + filepath.ToSlash(clean)
	}
	charts, err := Charts(moduleDir)
	if err != nil {
		return "", err
	}
	has := "no chart at all (no Chart.yaml anywhere)"
	if len(charts) > 0 {
		has = "these charts: " + strings.Join(charts, ", ")
	}
	return "", fmt.Errorf("no chart %s in %s: the module %s (%s); it has %s", filepath.ToSlash(clean), moduleName(moduleDir), why, moduleDir, has)
}

// Charts lists the chart directories of the module in moduleDir (slash-separated, relative to
// its root, sorted): every directory with a Chart.yaml, but not the subcharts inside a chart.
func Charts(moduleDir string) ([]string, error) {
	var charts []string
	err := filepath.WalkDir(moduleDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if _, err := os.Stat(filepath.Join(p, "Chart.yaml")); err != nil {
			return nil //nolint:nilerr // no Chart.yaml here: not a chart, keep looking below
		}
		rel, err := filepath.Rel(moduleDir, p)
		if err != nil {
			return err
		}
		charts = append(charts, filepath.ToSlash(rel))
		return filepath.SkipDir // a chart's charts/ holds its subcharts, not charts of the module
	})
	if err != nil {
		return nil, fmt.Errorf("listing the charts of %s: %w", moduleName(moduleDir), err)
	}
	slices.Sort(charts)
	return charts, nil
}

// moduleName names the module in dir for a person: path@version when dir is a directory of the
// module cache (<GOMODCACHE>/<escaped path>@<escaped version>), its go.mod's module path
// otherwise, and the directory itself when it has no go.mod.
func moduleName(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod")) //nolint:gosec // G304: the go.mod of the module the caller names
	if err != nil {
		return "module directory " + dir
	}
	modPath := modfile.ModulePath(data)
	if modPath == "" {
		return "module directory " + dir
	}
	base := filepath.Base(dir)
	if i := strings.LastIndex(base, "@"); i >= 0 {
		if v, err := module.UnescapeVersion(base[i+1:]); err == nil {
			return modPath + "@" + v
		}
	}
	return modPath
}
