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

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/gomodule"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// Binaries builds every binary the target's images run (a module version's once, then from the
// cache; a source directory's every time, Go's build cache making the second build quick) and
// returns them by image reference. Prebuilt images need none.
func (t *Target) Binaries(ctx context.Context, progress io.Writer) (map[string]string, error) {
	out := map[string]string{}
	for _, b := range t.Source.Binaries {
		var bin string
		var err error
		if m := t.Source.Module; m != nil {
			bin, err = gomodule.Build(ctx, m.Path, m.Version, b.Package, progress)
		} else {
			bin, err = t.buildFromDir(ctx, b.Package, progress)
		}
		if err != nil {
			return nil, fmt.Errorf("target %s, image %s: %w", t.Name, b.Image, err)
		}
		out[b.Image] = bin
	}
	return out, nil
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
