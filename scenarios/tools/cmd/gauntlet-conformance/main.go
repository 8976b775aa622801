// Command gauntlet-conformance runs the webhook contract's suite (e2e/conformance) against each
// target it is given, once per certificate mode the target declares, each in its own cluster,
// and writes the grid of W checks × modes (`make e2e-conformance TARGET=<name|path> …`):
//
//	go run ./scenarios/tools/cmd/gauntlet-conformance -target gatekeeper -out _output/conformance -- --provider=local
//	go run ./scenarios/tools/cmd/gauntlet-conformance -target "gauntlet gatekeeper" -- --provider=local
//	go run ./scenarios/tools/cmd/gauntlet-conformance -target all -- --provider=kind
//
// With -merge it runs nothing and writes one grid of earlier runs, such as the nightly's jobs',
// one per provider and Kubernetes version, to <out>/report.md; it exits 1 naming every changed
// cell:
//
//	go run ./scenarios/tools/cmd/gauntlet-conformance -merge "parts/v1.37.2-local parts/v1.37.2-kind" -out _output/conformance-grid
//
// The arguments after -- go to every run of the suite (go test … -args). It builds a target's
// binaries first, so the runs find them cached. Results: <out>/<target>/report.md,
// summary.json (the grid), and each mode's own report, log and artifacts under
// <out>/<target>/<mode>/; with several targets (one after another), also <out>/report.md, the
// grids side by side, and <out>/summary.json. It exits 1 when a cell is unexpected: a failure
// the description does not declare, or a declared divergence that no longer reproduces.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/conformance"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/suiterun"
)

func main() {
	names := flag.String("target", suite.DefaultTarget, "the targets, separated by spaces or commas: each a name under scenarios/targets, or a path to its description; all: every target under scenarios/targets")
	jobs := flag.Int("jobs", 1, "how many modes of a target run at once, each its own cluster")
	timeout := flag.String("timeout", "30m", "go test -timeout of each mode's run")
	out := flag.String("out", "_output/conformance", "where the grids and each mode's report go: <out>/<target>/")
	merge := flag.String("merge", "", "run nothing: merge the grids of these earlier runs' -out directories (space-separated) into <out>/report.md")
	flag.Parse()
	if *merge != "" {
		os.Exit(mergeRuns(strings.Fields(*merge), *out))
	}
	os.Exit(run(*names, *jobs, *timeout, *out, flag.Args()))
}

// mergeRuns writes one grid of the runs in parts (the nightly's, one per provider and
// Kubernetes version) to <out>/report.md and <out>/summary.json, and prints it; it exits 1
// naming every changed cell — a failure no description declares, or a declared divergence that
// no longer reproduces — and 2 when a part cannot be read.
func mergeRuns(parts []string, out string) int {
	out, err := filepath.Abs(out)
	if err != nil {
		return fail("%v", err)
	}
	var grids []conformance.Grid
	var ran []report.Summary
	var reports []string // of grids[i], relative to out
	for _, part := range parts {
		g, r, s, err := conformance.ReadGrids(part)
		if err != nil {
			return fail("%v", err)
		}
		for _, path := range r {
			abs, err := filepath.Abs(path)
			if err == nil {
				path, err = filepath.Rel(out, abs)
			}
			if err != nil {
				return fail("%v", err)
			}
			reports = append(reports, path)
		}
		grids, ran = append(grids, g...), append(ran, s...)
	}
	if err := os.MkdirAll(out, 0o750); err != nil {
		return fail("%v", err)
	}
	var changed []string
	for _, g := range grids {
		changed = append(changed, g.Changed()...)
	}
	verdict := "No cell changed: every check passed, or failed as its target declares."
	if len(changed) > 0 {
		verdict = fmt.Sprintf("**%d cells changed** (a failure no description declares, or a declared divergence that no longer reproduces):\n\n- %s",
			len(changed), strings.Join(changed, "\n- "))
	}
	heading := fmt.Sprintf("# Conformance: %d runs of %d targets\n\n%s", len(parts), len(targetsOf(grids)), verdict)
	if err := writeAcross(out, heading, grids, ran, func(i int) string { return reports[i] }); err != nil {
		return fail("%v", err)
	}
	if len(changed) > 0 {
		return 1
	}
	return 0
}

// targetsOf names the targets of grids, each once.
func targetsOf(grids []conformance.Grid) []string {
	var names []string
	for _, g := range grids {
		if !slices.Contains(names, g.Target) {
			names = append(names, g.Target)
		}
	}
	return names
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "conformance: "+format+"\n", args...)
	return 2
}

// run loads every target first, so a misspelt one is reported before any cluster starts, then
// runs them one after another.
func run(names string, jobs int, timeout, out string, suiteArgs []string) int {
	root, err := workspace.Root()
	if err != nil {
		return fail("%v", err)
	}
	if out, err = filepath.Abs(out); err != nil {
		return fail("%v", err)
	}
	fields := strings.FieldsFunc(names, func(r rune) bool { return r == ',' || r == ' ' })
	if len(fields) == 0 {
		return fail("-target is empty: name a target under scenarios/targets (or all of them: all) or a path to a description")
	}
	if slices.Equal(fields, []string{"all"}) {
		if fields, err = suite.TargetNames(); err != nil {
			return fail("listing the targets under scenarios/targets: %v", err)
		}
	}
	paths, targets := map[*target.Target]string{}, []*target.Target(nil)
	for _, name := range fields {
		path, err := suite.TargetPath(name)
		if err != nil {
			return fail("%v", err)
		}
		t, err := target.Load(path)
		if err != nil {
			return fail("%v", err)
		}
		if i := slices.IndexFunc(targets, func(o *target.Target) bool { return o.Name == t.Name }); i >= 0 {
			return fail("target %s is named twice (%s and %s): its reports would overwrite each other", t.Name, paths[targets[i]], path)
		}
		paths[t], targets = path, append(targets, t)
	}
	ctx, stop := suiterun.CancelOnSignal(context.Background(), func(os.Signal, bool) {})
	defer stop()

	status := 0
	var grids []conformance.Grid
	var ran []report.Summary
	for _, t := range targets {
		g, summaries, code := runTarget(ctx, root, paths[t], t, jobs, timeout, filepath.Join(out, t.Name), suiteArgs)
		if code == 2 {
			return code
		}
		status = max(status, code)
		grids, ran = append(grids, g), append(ran, summaries...)
		if ctx.Err() != nil {
			return 1
		}
	}
	if len(grids) == 1 {
		// A single target's grid is its own report; one side by side from an earlier run would be stale.
		_ = os.Remove(filepath.Join(out, "report.md"))
		_ = os.Remove(filepath.Join(out, report.SummaryFile))
		return status
	}
	heading := "# Conformance of " + strconv.Itoa(len(grids)) + " targets"
	if err := writeAcross(out, heading, grids, ran, func(i int) string { return grids[i].Target + "/report.md" }); err != nil {
		return fail("%v", err)
	}
	return status
}

// writeAcross writes <out>/report.md — heading, then the grids side by side (each linked to
// reportOf(i)) with the doctor's score over all of them — and <out>/summary.json, every grid, and
// prints the report.
func writeAcross(out, heading string, grids []conformance.Grid, ran []report.Summary, reportOf func(i int) string) error {
	md := heading + "\n\n" + conformance.Across(grids, reportOf)
	if score := conformance.DoctorScore(ran); score != "" {
		md += "\n" + score + "\n"
	}
	if err := os.WriteFile(filepath.Join(out, "report.md"), []byte(md), 0o644); err != nil { //nolint:gosec // G306: a report for people to read
		return err
	}
	data, err := json.MarshalIndent(grids, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, report.SummaryFile), append(data, '\n'), 0o644); err != nil { //nolint:gosec // G306: a report for people to read
		return err
	}
	fmt.Printf("\n%s\nconformance: %d grids; report: %s\n", md, len(grids), filepath.Join(suiterun.DisplayPath(out), "report.md"))
	return nil
}

// runTarget runs the suite once per mode t declares and writes its grid under out; it returns the
// grid, the summaries the modes wrote, and status 1 when a cell is unexpected, 2 when the target
// could not be run.
func runTarget(ctx context.Context, root, path string, t *target.Target, jobs int, timeout, out string, suiteArgs []string) (conformance.Grid, []report.Summary, int) {
	start := time.Now()
	fmt.Printf("conformance: target %s (%s), modes %s; building its images …\n", t.Name, conformance.DescribeSource(t), strings.Join(t.CertModes.Declared(), ", "))
	tr := conformance.TargetRun{Path: path, Target: t, Out: out}
	if err := tr.Prepare(ctx, os.Stdout); err != nil {
		return conformance.Grid{}, nil, fail("%v", err)
	}
	r := suiterun.New(suiterun.Options{
		Suites: t.CertModes.Declared(), Jobs: jobs, Dir: tr.Dir, Display: suiterun.Plain{W: os.Stdout},
		Command: func(ctx context.Context, mode string) *exec.Cmd {
			return suiterun.GoTest(root, timeout, append(slices.Clone(suiteArgs), tr.Args(mode)...))(ctx, conformance.Suite)
		},
	})
	r.Run(ctx)

	g, ran, err := tr.Report()
	if err != nil {
		return g, ran, fail("%v", err)
	}
	fmt.Printf("\n%s\nconformance: target %s in %s; report: %s\n", g.Markdown(), t.Name, time.Since(start).Round(time.Second),
		filepath.Join(suiterun.DisplayPath(out), "report.md"))
	if g.Failed() {
		return g, ran, 1
	}
	return g, ran, 0
}
