package target

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/gomodule"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// Images builds what each image the target builds holds — its programs (a module version's
// once, then from the cache; a source directory's every time, Go's build cache making the
// second build quick) and its files — or, for a stand-in, gauntlet's stand-in program; and
// returns them by image reference. An entrypoint's path the description leaves out is left
// "" for the chart to settle (Entrypoints). Prebuilt images need none.
func (t *Target) Images(ctx context.Context, progress io.Writer) (map[string]cluster.Image, error) {
	out := map[string]cluster.Image{}
	var moduleDir string
	for i, b := range t.Source.Binaries {
		field := fmt.Sprintf("source.binaries[%d]", i)
		img := cluster.Image{Entrypoint: b.Path, Programs: map[string]string{}, Files: map[string]string{}}
		var err error
		if img.Binary, err = t.build(ctx, field+".package", b.Package, progress); err != nil {
			return nil, err
		}
		for j, p := range b.Programs {
			if img.Programs[p.Path], err = t.build(ctx, fmt.Sprintf("%s.programs[%d].package", field, j), p.Package, progress); err != nil {
				return nil, err
			}
		}
		for j, f := range b.Files {
			from := filepath.Join(t.dir, f.From)
			if m := t.Source.Module; m != nil {
				if moduleDir == "" {
					if moduleDir, err = gomodule.Resolve(ctx, m.Path, m.Version); err != nil {
						return nil, fmt.Errorf("target %s: %w", t.Name, err)
					}
				}
				from = filepath.Join(moduleDir, f.From)
				if _, err := os.Stat(from); err != nil {
					return nil, t.problem(fmt.Sprintf("%s.files[%d].from", field, j), "%s is not in module %s@%s (%s): give a path relative to the module's root", f.From, m.Path, m.Version, moduleDir)
				}
			}
			img.Files[f.Path] = from
		}
		out[b.Image] = img
	}
	if len(t.Source.StandIns) == 0 {
		return out, nil
	}
	built, err := workspace.Build(ctx, workspace.BinDir(), workspace.BuildOptions{Static: true}, workspace.StandInPackage)
	if err != nil {
		return nil, fmt.Errorf("target %s, stand-ins: %w", t.Name, err)
	}
	for _, si := range t.Source.StandIns {
		out[si.Image] = cluster.Image{Binary: built[workspace.StandInPackage], Env: map[string]string{workspace.StandInEnv: si.Runs}}
	}
	return out, nil
}

// build builds main package pkg of the target's source, the description's field.
func (t *Target) build(ctx context.Context, field, pkg string, progress io.Writer) (string, error) {
	var bin string
	var err error
	if m := t.Source.Module; m != nil {
		bin, err = gomodule.Build(ctx, m.Path, m.Version, pkg, progress)
	} else {
		bin, err = t.buildFromDir(ctx, pkg, progress)
	}
	if err != nil {
		return "", t.problem(field, "%s does not build: %s; give a main package of the module, relative to its root (. for the root)", pkg, strings.TrimSpace(err.Error()))
	}
	return bin, nil
}

// buildFromDir builds pkg of the source directory statically into the cache.
func (t *Target) buildFromDir(ctx context.Context, pkg string, progress io.Writer) (string, error) {
	dir := filepath.Join(t.dir, t.Source.Dir)
	outDir := filepath.Join(workspace.CacheDir(), "targets", t.Name)
	if err := os.MkdirAll(outDir, 0o750); err != nil {
		return "", err
	}
	name := filepath.Base(filepath.Join(dir, pkg))
	bin := filepath.Join(outDir, name)
	// Built beside the binary and renamed over it: suites building it at once each replace it whole.
	tmp, err := os.CreateTemp(outDir, name+".build-*")
	if err != nil {
		return "", err
	}
	_ = tmp.Close() // go build writes it
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", tmp.Name(), pkg) //nolint:gosec // G204: go build of the package a target description names
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("go build %s in %s: %w\n%s", pkg, dir, err, out)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", err
	}
	_, _ = fmt.Fprintf(progress, "built %s (%s) from %s in %.1fs\n", name, pkg, dir, time.Since(start).Seconds())
	return bin, nil
}

// ChartDir is the chart's directory: inside the module version (fetched from the module proxy
// into the module cache when it is not there yet), or relative to the description.
func (t *Target) ChartDir(ctx context.Context) (string, error) {
	m := t.Source.Module
	if m == nil {
		return filepath.Join(t.dir, t.Chart.Path), nil
	}
	moduleDir, err := gomodule.Resolve(ctx, m.Path, m.Version)
	if err != nil {
		return "", fmt.Errorf("target %s: %w", t.Name, err)
	}
	return gomodule.ChartDir(moduleDir, t.Chart.Path)
}

// LoadChart loads the chart (ChartDir) with the subcharts chart.dependencies names, each from
// its Go module (fetched into the module cache when it is not there yet).
func (t *Target) LoadChart(ctx context.Context) (*helmchart.Chart, error) {
	dir, err := t.ChartDir(ctx)
	if err != nil {
		return nil, err
	}
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading the chart of target %s from %s: %w", t.Name, dir, err)
	}
	for i, d := range t.Chart.Dependencies {
		field := fmt.Sprintf("chart.dependencies[%d]", i)
		moduleDir, err := gomodule.Resolve(ctx, d.Module.Path, d.Module.Version)
		if err != nil {
			return nil, t.problem(field+".module", "%v", err)
		}
		subDir, err := gomodule.ChartDir(moduleDir, d.Path)
		if err != nil {
			return nil, t.problem(field+".path", "%v", err)
		}
		sub, err := loader.Load(subDir)
		if err != nil {
			return nil, t.problem(field+".path", "loading the subchart from %s: %v", subDir, err)
		}
		if err := addDependency(ch, d.Name, sub); err != nil {
			return nil, t.problem(field, "%v", err)
		}
	}
	return ch, nil
}

// addDependency adds sub to ch as its dependency name: one ch's Chart.yaml lists and does not
// carry in its charts/ directory.
func addDependency(ch *helmchart.Chart, name string, sub *helmchart.Chart) error {
	if sub.Name() != name {
		return fmt.Errorf("the subchart there is %s, not %s", sub.Name(), name)
	}
	var listed []string
	found := false
	for _, d := range ch.Metadata.Dependencies {
		listed = append(listed, d.Name)
		found = found || d.Name == name
	}
	if !found {
		return fmt.Errorf("chart %s lists no dependency %s (it lists: %s)", ch.Name(), name, strings.Join(listed, ", "))
	}
	for _, c := range ch.Dependencies() {
		if c.Name() == name {
			return fmt.Errorf("chart %s carries %s in its charts/ directory already: leave it out", ch.Name(), name)
		}
	}
	ch.AddDependency(sub)
	return nil
}

// caBundlePlaceholder is replaced, in a mode's values, by the CA bundle of the serving
// certificate the suite made for external mode.
const caBundlePlaceholder = "${CA_BUNDLE}"

// Values are the chart values of mode: chart.values, then the mode's, with ${CA_BUNDLE}
// replaced by caBundle (base64 of the PEM; "" outside external mode).
func (t *Target) Values(mode, caBundle string) map[string]any {
	values := chart.MergeValues(t.Chart.Values, t.CertModes.Mode(mode).Values)
	return replaceStrings(values, caBundlePlaceholder, caBundle).(map[string]any)
}

func replaceStrings(v any, old, replacement string) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = replaceStrings(e, old, replacement)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = replaceStrings(e, old, replacement)
		}
		return out
	case string:
		return strings.ReplaceAll(v, old, replacement)
	}
	return v
}
