// Command gauntlet-fuzz runs every Go fuzz target in the workspace for -fuzztime each
// (`make fuzz`; go test fuzzes one target per invocation) and tells a finding from Go's fuzz
// engine stopping on a busy machine:
//
//	go run ./scenarios/tools/cmd/gauntlet-fuzz -fuzztime 60s -out _output/fuzz
//
// A target fails only on a finding: an input the engine wrote that fails again when replayed
// as a plain test, or a seed corpus that fails. Two engine failures do not reproduce and are
// reported as such (⚠) instead: "context deadline exceeded" with no input written, when a worker
// is mid-input as -fuzztime ends (golang/go#51484), and "fuzzing process hung or terminated
// unexpectedly" on an input that passes when replayed (a worker stalled past the engine's fixed
// 10 s per input, golang/go#56238). Each target's full output goes to <out>/<target>.log; an
// input written by the engine is moved there too, so a run leaves the source tree as it was.
// Exit status: 1 when a target has a finding or fails in a way not named above, 2 on bad use.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// modules are the workspace's directories that hold fuzz targets.
var modules = []string{"operator", "scenarios", "e2e", "bench"}

func main() {
	fuzztime := flag.String("fuzztime", "60s", "go test -fuzztime of each target")
	out := flag.String("out", "_output/fuzz", "where each target's log, and any input the engine writes, go")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "fuzz: unexpected arguments %q; usage: gauntlet-fuzz [-fuzztime 60s] [-out dir]\n", flag.Args())
		os.Exit(2)
	}
	os.Exit(run(*fuzztime, *out))
}

func run(fuzztime, out string) int {
	root, err := workspace.Root()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fuzz: %v\n", err)
		return 2
	}
	targets, err := findTargets(root)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fuzz: %v\n", err)
		return 2
	}
	if len(targets) == 0 {
		fmt.Fprintf(os.Stderr, "fuzz: no fuzz targets found under %s\n", strings.Join(modules, ", "))
		return 1
	}
	if out, err = filepath.Abs(out); err == nil {
		err = os.MkdirAll(out, 0o750)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fuzz: %v\n", err)
		return 2
	}
	var findings, unreproduced []string
	for _, t := range targets {
		start := time.Now()
		fmt.Printf("• fuzz %-36s ./%s for %s\n", t.Name, t.Dir, fuzztime)
		v := fuzzOne(filepath.Join(root, t.Dir), t.Name, fuzztime, out)
		switch v.kind {
		case passed:
			fmt.Printf("  ✓ %s (%s)\n", v.detail, time.Since(start).Round(time.Second))
		case unreproducible:
			fmt.Printf("  ⚠ %s\n", v.detail)
			unreproduced = append(unreproduced, t.Name)
		case failed:
			fmt.Printf("  ✗ %s\n", v.detail)
			findings = append(findings, t.Name)
		}
	}
	summary := fmt.Sprintf("%d fuzz targets ran for %s each", len(targets), fuzztime)
	if len(unreproduced) > 0 {
		summary += fmt.Sprintf("; the fuzz engine stopped without a finding in %s (see ⚠ above)", strings.Join(unreproduced, ", "))
	}
	if len(findings) > 0 {
		fmt.Printf("✗ %s; failed: %s (logs: %s)\n", summary, strings.Join(findings, ", "), out)
		return 1
	}
	fmt.Printf("✓ %s\n", summary)
	return 0
}

type target struct{ Dir, Name string }

var fuzzDecl = regexp.MustCompile(`(?m)^func (Fuzz\w*)\(f \*testing\.F\)`)

// findTargets lists fuzz targets by their declaration, so no test binary is built to list them.
func findTargets(root string) ([]target, error) {
	var targets []target
	for _, m := range modules {
		err := filepath.WalkDir(filepath.Join(root, m), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path) //nolint:gosec // G304: a test file of the workspace, found by the walk
			if err != nil {
				return err
			}
			dir, _ := filepath.Rel(root, filepath.Dir(path))
			for _, m := range fuzzDecl.FindAllSubmatch(src, -1) {
				targets = append(targets, target{Dir: dir, Name: string(m[1])})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(targets, func(a, b target) int { return strings.Compare(a.Dir+" "+a.Name, b.Dir+" "+b.Name) })
	return targets, nil
}

type kind int

const (
	passed kind = iota
	unreproducible
	failed
)

type verdict struct {
	kind   kind
	detail string
}

// fuzzOne fuzzes one target and judges the result, replaying what the engine reports as a plain
// test. Its log, with the replay's output appended, is <out>/<name>.log.
func fuzzOne(dir, name, fuzztime, out string) verdict {
	logPath := filepath.Join(out, name+".log")
	output, err := goTest(dir, "-run", "^$", "-fuzz", "^"+name+"$", "-fuzztime", fuzztime)
	v := judge(name, output, err, func(run string) (string, error) {
		replayed, err := goTest(dir, "-v", "-timeout", replayTimeout.String(), "-run", run)
		output = append(output, "\n--- replay: go test -run "+run+"\n"...)
		output = append(output, replayed...)
		return string(replayed), err
	})
	if input := writtenInput(output); input != "" {
		v.detail += "\n    the input: " + keep(dir, input, filepath.Join(out, name+"-"+filepath.Base(input)))
	}
	if err := os.WriteFile(logPath, output, 0o600); err != nil {
		v.detail += fmt.Sprintf(" (its log could not be written: %v)", err)
	} else if v.kind != passed {
		v.detail += "\n    log: " + logPath
	}
	return v
}

// keep moves the input the engine wrote under the package's testdata/fuzz to dst, removing the
// directories the engine made for it if they are left empty, and says where the input is.
func keep(dir, input, dst string) string {
	if err := os.Rename(filepath.Join(dir, input), dst); err != nil {
		return filepath.Join(dir, input)
	}
	for d := filepath.Dir(input); d != "."; d = filepath.Dir(d) {
		if os.Remove(filepath.Join(dir, d)) != nil {
			break
		}
	}
	return dst
}

func goTest(dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(context.Background(), "go", append(append([]string{"test"}, args...), ".")...) //nolint:gosec // G204: go test of a fuzz target found in the workspace
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

const (
	// inputLimit is how long the engine lets one input run before it calls the worker hung.
	inputLimit = 10 * time.Second
	// replayTimeout bounds a replay, so an input that hangs for real fails it.
	replayTimeout = 2 * time.Minute
)

var (
	passedOrStarted = regexp.MustCompile(`^\s*(=== (RUN|PAUSE|CONT|NAME)|--- PASS)`)
	replayedIn      = regexp.MustCompile(`--- PASS: \S+ \(([0-9.]+s)\)`)
	inputWritten    = regexp.MustCompile(`Failing input written to (testdata/fuzz/\S+)`)
	lastProgress    = regexp.MustCompile(`(?m)^fuzz: elapsed: .*$`)
	engineStalled   = "fuzzing process hung or terminated unexpectedly"
	deadlineRace    = "context deadline exceeded"
)

// writtenInput is the path, relative to the package, of the input the engine wrote, if any.
func writtenInput(output []byte) string {
	if m := inputWritten.FindSubmatch(output); m != nil {
		return string(m[1])
	}
	return ""
}

// judge tells what a fuzz run's output (and go test's error) means. replay runs the package's
// tests matching a -run pattern and returns their output.
func judge(name string, output []byte, runErr error, replay func(run string) (string, error)) verdict {
	if runErr == nil {
		progress := lastProgress.FindAll(output, -1)
		if len(progress) == 0 {
			return verdict{passed, "passed"}
		}
		return verdict{passed, strings.TrimPrefix(string(progress[len(progress)-1]), "fuzz: ")}
	}
	var exit *exec.ExitError
	if !errors.As(runErr, &exit) {
		return verdict{failed, fmt.Sprintf("go test did not run: %v", runErr)}
	}
	if input := writtenInput(output); input != "" {
		id := filepath.Base(input)
		replayed, err := replay("^" + name + "$/^" + id + "$")
		switch {
		case err != nil:
			return verdict{failed, fmt.Sprintf("a finding: the input %s fails when replayed:\n%s", id, indent(failures(replayed)))}
		case slowerThan(replayed, inputLimit):
			return verdict{failed, fmt.Sprintf("a finding: the engine reported %q on the input %s, and it takes longer than the engine's %s per input when replayed:\n%s", engineStalled, id, inputLimit, indent(tail([]byte(replayed), 5)))}
		case bytes.Contains(output, []byte(engineStalled)):
			return verdict{unreproducible, fmt.Sprintf("the engine reported %q on the input %s, which passes when replayed: a worker stalled past the engine's 10 s per input on a busy machine (golang/go#56238)", engineStalled, id)}
		default:
			return verdict{failed, fmt.Sprintf("the engine wrote the input %s as failing, and it passes when replayed: a failure that depends on earlier inputs (state left between runs):\n%s", id, indent(tail(output, 20)))}
		}
	}
	if bytes.Contains(output, []byte(deadlineRace)) {
		if replayed, err := replay("^" + name + "$"); err != nil {
			return verdict{failed, fmt.Sprintf("the seed corpus fails:\n%s", indent(failures(replayed)))}
		}
		return verdict{unreproducible, fmt.Sprintf("the engine stopped with %q and wrote no input, and the seed corpus passes: a worker was mid-input as -fuzztime ended on a busy machine (golang/go#51484)", deadlineRace)}
	}
	return verdict{failed, fmt.Sprintf("go test failed and wrote no failing input (a build error, or a failing seed):\n%s", indent(tail(output, 20)))}
}

// slowerThan tells whether a test in a replay's -v output took limit or longer.
func slowerThan(replayed string, limit time.Duration) bool {
	for _, m := range replayedIn.FindAllStringSubmatch(replayed, -1) {
		if d, err := time.ParseDuration(m[1]); err == nil && d >= limit {
			return true
		}
	}
	return false
}

// failures is what a replay's -v output says beyond which tests ran and passed: the failing
// tests' messages and results, at most 20 lines.
func failures(replayed string) string {
	var lines []string
	for _, line := range strings.Split(strings.TrimRight(replayed, "\n"), "\n") {
		if !passedOrStarted.MatchString(line) {
			lines = append(lines, line)
		}
	}
	return tail([]byte(strings.Join(lines, "\n")), 20)
}

// tail is the last n lines of output.
func tail(output []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(output), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
