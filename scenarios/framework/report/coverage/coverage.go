// Package coverage turns the operator's coverage counters into a report: what the e2e suites
// exercised (the coverage-instrumented operator's processes wrote them, `make e2e COVER=1`),
// what the operator's own unit and envtest tests exercised, and the two merged. It drives the
// Go toolchain's own tools (go tool covdata, go tool cover) and parses what they print.
package coverage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Files a Report writes into its output directory.
const (
	E2EProfile    = "e2e.out"
	MergedProfile = "merged.out"
	E2EHTML       = "e2e.html"
	MergedHTML    = "merged.html"
	SummaryFile   = "summary.md"
)

// Watched are the operator packages whose functions the e2e suites are expected to enter:
// the webhook server and its rules, certificates, and lease coordination. A function of theirs
// that e2e never enters is named in the report.
var Watched = []string{
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook",
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook/defaulting",
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook/validation",
	"github.com/gauntlet-dev/gauntlet/operator/internal/certs",
	"github.com/gauntlet-dev/gauntlet/operator/internal/namespacescope",
}

// Package is one package's statement coverage, in percent, from each source.
type Package struct {
	Path          string
	E2E, Unit     float64
	Merged        float64
	HasUnitCounts bool
}

// Func is a function and its statement coverage by the e2e suites.
type Func struct {
	Package, File string
	Line          int
	Name          string
	Percent       float64
}

// Report is what the e2e suites and the unit tests covered of the operator.
type Report struct {
	// E2ETotal and MergedTotal are the operator's statement coverage in percent.
	E2ETotal, MergedTotal float64
	Packages              []Package
	// NeverEntered are the functions of Watched packages the e2e suites never entered.
	NeverEntered []Func
}

// Build reads the counters in e2eDir (and unitDir, when set), writes the profiles, HTML pages
// and summary into outDir, and returns the report. root is the workspace the operator's
// sources are in.
func Build(ctx context.Context, root, e2eRoot, unitDir, outDir string) (*Report, error) {
	e2eDirs, err := CounterDirs(e2eRoot)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o750); err != nil {
		return nil, err
	}
	e2eDir := strings.Join(e2eDirs, ",")
	inputs := e2eDir
	if unitDir != "" {
		if _, err := CounterDirs(unitDir); err != nil {
			return nil, err
		}
		inputs += "," + unitDir
	}
	e2eProfile, mergedProfile := filepath.Join(outDir, E2EProfile), filepath.Join(outDir, MergedProfile)
	steps := [][]string{
		{"tool", "covdata", "textfmt", "-i=" + e2eDir, "-o=" + e2eProfile},
		{"tool", "covdata", "textfmt", "-i=" + inputs, "-o=" + mergedProfile},
		{"tool", "cover", "-html=" + e2eProfile, "-o=" + filepath.Join(outDir, E2EHTML)},
		{"tool", "cover", "-html=" + mergedProfile, "-o=" + filepath.Join(outDir, MergedHTML)},
	}
	for _, args := range steps {
		if _, err := goTool(ctx, root, args...); err != nil {
			return nil, err
		}
	}
	percents := map[string]map[string]float64{}
	for _, dir := range []string{e2eDir, unitDir, inputs} {
		if dir == "" {
			continue
		}
		out, err := goTool(ctx, root, "tool", "covdata", "percent", "-i="+dir)
		if err != nil {
			return nil, err
		}
		if percents[dir], err = ParsePercent(out); err != nil {
			return nil, err
		}
	}
	r := &Report{}
	for path, merged := range percents[inputs] {
		p := Package{Path: path, E2E: percents[e2eDir][path], Merged: merged}
		p.Unit, p.HasUnitCounts = percents[unitDir][path]
		r.Packages = append(r.Packages, p)
	}
	slices.SortFunc(r.Packages, func(a, b Package) int { return strings.Compare(a.Path, b.Path) })

	e2eFuncs, err := goTool(ctx, root, "tool", "cover", "-func="+e2eProfile)
	if err != nil {
		return nil, err
	}
	funcs, total, err := ParseFunc(e2eFuncs)
	if err != nil {
		return nil, err
	}
	r.E2ETotal = total
	for _, f := range funcs {
		if f.Percent == 0 && slices.Contains(Watched, f.Package) {
			r.NeverEntered = append(r.NeverEntered, f)
		}
	}
	mergedFuncs, err := goTool(ctx, root, "tool", "cover", "-func="+mergedProfile)
	if err != nil {
		return nil, err
	}
	if _, r.MergedTotal, err = ParseFunc(mergedFuncs); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(outDir, SummaryFile), r.WriteMarkdown); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(outDir, JSONFile), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}); err != nil {
		return nil, err
	}
	return r, nil
}

// CounterDirs are the directories under root (root itself, and its subdirectories: one per
// suite, as --cover-dir writes them) that hold coverage counters. It fails naming root when
// there are none: no instrumented process exited normally there (killed, or never started).
func CounterDirs(root string) ([]string, error) {
	var dirs []string
	for _, dir := range append([]string{root}, subdirs(root)...) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("coverage counters: %w", err)
		}
		if slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), "covcounters.") }) {
			dirs = append(dirs, dir)
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no coverage counters (covcounters.*) in %s or its subdirectories: no coverage-instrumented process exited normally there (was the suite run with --cover-dir, on the local provider?)", root)
	}
	return dirs, nil
}

func subdirs(root string) []string {
	entries, _ := os.ReadDir(root) // CounterDirs reports an unreadable root
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(root, e.Name()))
		}
	}
	return out
}

func goTool(ctx context.Context, root string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...) //nolint:gosec // G204: go tool with arguments this package builds
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

var percentEntry = regexp.MustCompile(`(\S+)\s+coverage:\s+([0-9.]+)% of statements`)

// ParsePercent reads `go tool covdata percent`: "<package> coverage: N% of statements" per
// package. A package without statements gets its name and no newline, so the next package's
// entry follows on the same line; such a package is left out.
func ParsePercent(out []byte) (map[string]float64, error) {
	pcts := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		entries := percentEntry.FindAllStringSubmatch(line, -1)
		if entries == nil {
			return nil, fmt.Errorf("go tool covdata percent: unexpected line %q", line)
		}
		for _, m := range entries {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				return nil, fmt.Errorf("go tool covdata percent: %q: %w", line, err)
			}
			pcts[m[1]] = v
		}
	}
	return pcts, sc.Err()
}

// ParseFunc reads `go tool cover -func`: "<file>:<line>:\t<func>\t<N>%" per function, then
// "total:\t(statements)\t<N>%".
func ParseFunc(out []byte) ([]Func, float64, error) {
	var (
		funcs    []Func
		total    float64
		hasTotal bool
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 3 || !strings.HasSuffix(fields[2], "%") {
			return nil, 0, fmt.Errorf("go tool cover -func: unexpected line %q", sc.Text())
		}
		pct, err := strconv.ParseFloat(strings.TrimSuffix(fields[2], "%"), 64)
		if err != nil {
			return nil, 0, fmt.Errorf("go tool cover -func: %q: %w", sc.Text(), err)
		}
		if fields[0] == "total:" {
			total, hasTotal = pct, true
			continue
		}
		loc := strings.TrimSuffix(fields[0], ":")
		i := strings.LastIndex(loc, ":")
		if i < 0 {
			return nil, 0, fmt.Errorf("go tool cover -func: no line in %q", fields[0])
		}
		line, err := strconv.Atoi(loc[i+1:])
		if err != nil {
			return nil, 0, fmt.Errorf("go tool cover -func: line of %q: %w", fields[0], err)
		}
		file := loc[:i]
		funcs = append(funcs, Func{Package: filepath.Dir(file), File: file, Line: line, Name: fields[1], Percent: pct})
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	if !hasTotal {
		return nil, 0, errors.New("go tool cover -func: no total line")
	}
	return funcs, total, nil
}

// Headline is the summary table's line: "operator covered by e2e: N %".
func (r *Report) Headline() string {
	return fmt.Sprintf("operator covered by e2e: %.1f %% of statements (with unit and envtest tests: %.1f %%)", r.E2ETotal, r.MergedTotal)
}

// WriteMarkdown writes the report as Markdown: the headline, one row per package, and the
// watched functions e2e never entered.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Operator coverage\n\n**%s**\n\n", r.Headline())
	fmt.Fprintf(&b, "Pages: [e2e only](%s), [e2e + unit + envtest](%s).\n\n", E2EHTML, MergedHTML)
	b.WriteString("| package | e2e | unit + envtest | merged |\n|---|---:|---:|---:|\n")
	for _, p := range r.Packages {
		unit := "—"
		if p.HasUnitCounts {
			unit = fmt.Sprintf("%.1f %%", p.Unit)
		}
		fmt.Fprintf(&b, "| `%s` | %.1f %% | %s | %.1f %% |\n", strings.TrimPrefix(p.Path, modulePrefix), p.E2E, unit, p.Merged)
	}
	fmt.Fprintf(&b, "\n## Webhook, certificate and lease functions e2e never enters (%d)\n\n", len(r.NeverEntered))
	if len(r.NeverEntered) == 0 {
		b.WriteString("None.\n")
	}
	for _, f := range r.NeverEntered {
		fmt.Fprintf(&b, "- `%s` — %s:%d\n", f.Name, strings.TrimPrefix(f.File, modulePrefix), f.Line)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// modulePrefix is trimmed from package and file paths in the report.
const modulePrefix = "github.com/gauntlet-dev/gauntlet/"

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path) //nolint:gosec // G304: the report directory the caller chose
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	return f.Close()
}

// JSONFile is where Build records the report for e2e-summary's headline.
const JSONFile = "coverage.json"

// ReadHeadline reads the headline of the report Build wrote into dir.
func ReadHeadline(dir string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, JSONFile)) //nolint:gosec // G304: the coverage directory the caller names
	if err != nil {
		return "", fmt.Errorf("operator coverage report: %w (make e2e COVER=1 writes it)", err)
	}
	var r Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", fmt.Errorf("operator coverage report %s: %w", filepath.Join(dir, JSONFile), err)
	}
	return r.Headline(), nil
}
