// Command gauntlet-e2e runs e2e suites at once, each as its own `go test` in its own cluster
// (`make e2e`, E2E_JOBS at a time): see package suiterun.
//
//	go run ./scenarios/tools/cmd/gauntlet-e2e -suites "autocert hostile" -jobs 2 -out _output/e2e -- --provider=local --e2e-output=$PWD/_output/e2e
//
// The arguments after -- go to every suite (go test … -args). Without -jobs it runs as many as
// the machine holds (suiterun.DefaultJobs); with -jobs it first checks that the machine holds
// that many (suiterun.CheckCapacity) and exits 2, naming the limit, when it does not. On a
// terminal it keeps one line per running suite; otherwise it prints plain progress lines. It
// ends with every failure's message, artifacts and log, and exits 1 when a suite failed.
//
// With -targets, the W checks against those targets run beside the suites, each certificate
// mode a target declares one more run of the conformance suite in a cluster of its own (named
// <target>/<mode>), as `make e2e-conformance` runs them: their reports and grid go to
// <targets-out>/<target>/, and what fails the run is the grid, which knows the target's declared
// divergences (`make test` runs Gatekeeper's modes so):
//
//	go run ./scenarios/tools/cmd/gauntlet-e2e -suites "autocert hostile" -targets gatekeeper -targets-out _output/conformance -out _output/e2e -- --provider=local --e2e-output=$PWD/_output/e2e
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chainsaw"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/conformance"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/matrix"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/suiterun"

	// Every cluster provider: their footprints and host preparation.
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers"
)

func main() {
	suites := flag.String("suites", "", "suites under e2e/, space-separated: those with no recorded time start first, in this order, then the others longest first by their last times (-times)")
	times := flag.String("times", "", "where the suites' last times on this machine are kept, by runs of whole suites (default "+durationsPath("<provider>")+"); a run of other suites or other plans keeps its own")
	jobs := flag.String("jobs", "", "how many suites run at once (E2E_JOBS; default: what the machine holds)")
	provider := flag.String("provider", cluster.DefaultProvider, "the suites' provider (PROVIDER), for the default of -jobs and the capacity check; pass --provider to the suites too")
	version := flag.String("kubernetes-version", suite.DefaultKubernetesVersion, "the suites' Kubernetes version (K8S_VERSION): kind's node image is built for it first")
	timeout := flag.String("timeout", "30m", "go test -timeout of each suite")
	out := flag.String("out", "_output/e2e", "the suites' report directory (their --e2e-output): each suite's log goes to <out>/<suite>/"+suiterun.LogFile)
	targets := flag.String("targets", "", "targets (names under scenarios/targets, or paths to descriptions), space-separated, whose W checks run beside the suites, every mode they declare")
	targetsOut := flag.String("targets-out", "_output/conformance", "where the targets' grids and each mode's report go: <targets-out>/<target>/")
	flag.Parse()
	if *times == "" {
		*times = durationsPath(*provider)
	}
	os.Exit(run(options{
		suites: strings.Fields(*suites), targets: strings.Fields(*targets), jobs: *jobs, provider: *provider, version: *version,
		timeout: *timeout, out: *out, targetsOut: *targetsOut, times: *times, suiteArgs: flag.Args(),
	}))
}

// options are the command's flags and the suites' arguments.
type options struct {
	suites, targets                                          []string
	jobs, provider, version, timeout, out, targetsOut, times string
	suiteArgs                                                []string
}

func run(o options) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
		return 2
	}
	if len(o.suites) == 0 {
		return fail("no suites to run (-suites)")
	}
	root, err := workspace.Root()
	if err != nil {
		return fail("%v", err)
	}
	if o.out, err = filepath.Abs(o.out); err != nil {
		return fail("%v", err)
	}
	targetRuns, err := loadTargets(o.targets, o.targetsOut)
	if err != nil {
		return fail("%v", err)
	}
	p, err := cluster.Lookup(o.provider)
	if err != nil {
		return fail("%v", err)
	}
	machine, err := suiterun.ReadMachine()
	if err != nil {
		return fail("reading this machine's capacity: %v", err)
	}
	runs := runsOf(o.suites, targetRuns, o.out)
	jobs, why := suiterun.DefaultJobs(p.Footprint, machine, len(runs.names)), "what this machine holds"
	if o.jobs != "" {
		if jobs, err = strconv.Atoi(o.jobs); err != nil || jobs < 1 {
			return fail("E2E_JOBS=%s: give a number of suites, at least 1", o.jobs)
		}
		why = "E2E_JOBS"
	}
	if p.Footprint.SharedCluster && jobs > 1 {
		return fail("E2E_JOBS=%d with PROVIDER=%s: every suite would use its one cluster, and a suite refuses a cluster holding another suite's release; run them one after another (E2E_JOBS=1)", jobs, o.provider)
	}
	if err := suiterun.CheckCapacity("E2E_JOBS", jobs, o.provider, p.Footprint, machine); err != nil {
		lines := "  - " + strings.ReplaceAll(err.Error(), "\n", "\n  - ")
		if jobs > 1 {
			return fail("this machine cannot hold %d %s suites at once:\n%s", jobs, o.provider, lines)
		}
		fmt.Fprintf(os.Stderr, "e2e: ⚠ this machine is short of what even one %s suite may need; running one at a time anyway:\n%s\n", o.provider, lines)
	}
	if err := os.MkdirAll(o.out, 0o750); err != nil {
		return fail("%v", err)
	}

	// With fewer slots than suites, the longest suite started last would run on alone.
	durations, err := suiterun.ReadDurations(o.times)
	if err != nil {
		return fail("reading the suites' last times: %v", err)
	}
	names := durations.LongestFirst(runs.names)

	var display suiterun.Display = suiterun.Plain{W: os.Stdout}
	if fd := int(os.Stdout.Fd()); term.IsTerminal(fd) {
		width, _, _ := term.GetSize(fd)
		display = &suiterun.Live{W: os.Stdout, Width: width}
	}
	r := suiterun.New(suiterun.Options{
		Suites: names, Jobs: jobs, Dir: runs.dir, Display: display,
		Command: runs.command(root, o.timeout, o.suiteArgs),
	})
	ctx, stop := suiterun.CancelOnSignal(context.Background(), func(sig os.Signal, first bool) {
		if first {
			r.Note(fmt.Sprintf("✗ interrupted (%s): every running suite deletes its cluster before it exits (up to %s); no other suite starts", sig, suite.InterruptGrace))
			return
		}
		r.Note("still waiting for the running suites to delete their clusters; their logs say how far they are")
	})
	defer stop()
	if p.HostPreparation != nil {
		// Every suite would otherwise prepare the host (build kind's node image) at the same time.
		if err := prepareHost(ctx, root, o.provider, o.version, o.out); err != nil {
			return fail("%v", err)
		}
	}
	// Built once before the runs, each of which would otherwise build them inside its own time
	// (several at once, the first time).
	if err := buildTargets(ctx, targetRuns); err != nil {
		return fail("%v", err)
	}
	if runs.conformance() && !selectsScenarios(o.suiteArgs) {
		if _, err := chainsaw.Build(ctx, root, os.Stdout); err != nil {
			// As in a suite of its own: the Chainsaw rows fail with the build's error, the rest runs.
			fmt.Fprintf(os.Stderr, "e2e: ⚠ %v\ne2e: every conformance run tries again and fails its Chainsaw rows with the error\n", err)
		}
	}

	fmt.Printf("e2e: %d suites on %s, %d at once (%s; %d cores, %.1f GiB free), longest first by their last times (%s): %s; each suite's log: %s\n",
		len(names), o.provider, jobs, why, machine.Cores, machine.Memory.Free/(1<<30), suiterun.DisplayPath(o.times), strings.Join(names, " "),
		filepath.Join(suiterun.DisplayPath(o.out), "<suite>", suiterun.LogFile))
	start := time.Now()
	states := r.Run(ctx)
	var sum time.Duration
	var ofSuites []suiterun.SuiteState
	failed := false
	for _, s := range states {
		sum += s.Elapsed(s.Ended)
		if _, ofTarget := runs.targetMode[s.Name]; !ofTarget {
			ofSuites = append(ofSuites, s)
			failed = failed || !s.OK()
		}
	}
	fmt.Printf("e2e: %d suites in %s, up to %d at once (their own times add up to %s)\n",
		len(states), time.Since(start).Round(time.Second), jobs, sum.Round(time.Second))
	// An interrupted run's suites ended early, and a run of some scenarios is short: their times
	// would mislead the next run's order.
	if ctx.Err() == nil && !selectsScenarios(o.suiteArgs) {
		if err := durations.Record(o.times, states); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: ⚠ keeping the suites' times for the next run's order: %v\n", err)
		}
	}
	suiterun.WriteFailures(os.Stdout, ofSuites)
	unexpected, err := reportTargets(os.Stdout, targetRuns)
	if err != nil {
		return fail("%v", err)
	}
	if failed || unexpected {
		return 1
	}
	return 0
}

// reportTargets writes each target's grid and prints it, and says whether a cell is unexpected.
// A mode's suite fails on a declared divergence too, so its grid, not its exit, is the verdict.
func reportTargets(w io.Writer, trs []conformance.TargetRun) (unexpected bool, err error) {
	for _, tr := range trs {
		g, _, err := tr.Report()
		if err != nil {
			return unexpected, err
		}
		_, _ = fmt.Fprintf(w, "\n%s\ne2e: target %s's grid: %s\n", g.Markdown(), tr.Target.Name, filepath.Join(suiterun.DisplayPath(tr.Out), "report.md"))
		if changed := g.Changed(); len(changed) > 0 {
			_, _ = fmt.Fprintf(w, "\nFAILED: target %s, cells its description does not declare:\n  ✗ %s\n", tr.Target.Name, strings.Join(changed, "\n  ✗ "))
			unexpected = true
		}
	}
	return unexpected, nil
}

// runs are the run's suites and targets' modes, by the name each has in it: a suite's own, or
// <target>/<mode>.
type runs struct {
	names      []string
	out        string
	targetMode map[string]targetMode
}

// targetMode is one mode of a target's run.
type targetMode struct {
	run  conformance.TargetRun
	mode string
}

// runsOf names the targets' modes first: a run with no recorded time starts in the order given
// (on a fresh machine, every run), and a mode, which installs the target and runs the whole W
// catalog, is among the longest.
func runsOf(suites []string, targetRuns []conformance.TargetRun, out string) runs {
	rs := runs{out: out, targetMode: map[string]targetMode{}}
	for _, tr := range targetRuns {
		for _, m := range tr.Target.CertModes.Declared() {
			name := tr.Target.Name + "/" + m
			rs.names = append(rs.names, name)
			rs.targetMode[name] = targetMode{run: tr, mode: m}
		}
	}
	rs.names = append(rs.names, suites...)
	return rs
}

// dir is where the run named name reports: a suite under out, a target's mode under the
// target's own directory.
func (rs runs) dir(name string) string {
	if tm, ok := rs.targetMode[name]; ok {
		return tm.run.Dir(tm.mode)
	}
	return filepath.Join(rs.out, name)
}

// command runs a suite with the suites' arguments, a target's mode as the conformance suite
// with its target's after them.
func (rs runs) command(root, timeout string, suiteArgs []string) func(ctx context.Context, name string) *exec.Cmd {
	return func(ctx context.Context, name string) *exec.Cmd {
		if tm, ok := rs.targetMode[name]; ok {
			return suiterun.GoTest(root, timeout, append(slices.Clone(suiteArgs), tm.run.Args(tm.mode)...))(ctx, conformance.Suite)
		}
		return suiterun.GoTest(root, timeout, suiteArgs)(ctx, name)
	}
}

// conformance says whether the conformance suite runs: Chainsaw runs a target's own tests in it.
func (rs runs) conformance() bool {
	return len(rs.targetMode) > 0 || slices.Contains(rs.names, conformance.Suite)
}

// loadTargets loads every target named (before any cluster starts, so that a misspelt one is
// reported first), each run reporting under <out>/<target>/.
func loadTargets(names []string, out string) ([]conformance.TargetRun, error) {
	out, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	var trs []conformance.TargetRun
	for _, name := range names {
		path, err := suite.TargetPath(name)
		if err != nil {
			return nil, err
		}
		t, err := target.Load(path)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(trs, func(o conformance.TargetRun) bool { return o.Target.Name == t.Name }) {
			return nil, fmt.Errorf("-targets names target %s twice: its reports would overwrite each other", t.Name)
		}
		trs = append(trs, conformance.TargetRun{Path: path, Target: t, Out: filepath.Join(out, t.Name)})
	}
	return trs, nil
}

// buildTargets builds every target's images and empties its report directory.
func buildTargets(ctx context.Context, trs []conformance.TargetRun) error {
	for _, tr := range trs {
		fmt.Printf("e2e: target %s (%s), modes %s; building its images …\n", tr.Target.Name, conformance.DescribeSource(tr.Target), strings.Join(tr.Target.CertModes.Declared(), ", "))
		if err := tr.Prepare(ctx, os.Stdout); err != nil {
			return err
		}
	}
	return nil
}

// durationsPath is where the suites' last times on provider are kept.
func durationsPath(provider string) string {
	return filepath.Join(workspace.CacheDir(), "e2e", "suite-times-"+provider+".json")
}

// selectsScenarios says whether the suites' arguments pick some of their scenarios (--labels):
// such a run's times say nothing of a whole suite's.
func selectsScenarios(suiteArgs []string) bool {
	return slices.ContainsFunc(suiteArgs, func(a string) bool { return strings.HasPrefix(strings.TrimLeft(a, "-"), "labels") })
}

// prepareHost runs the provider's host preparation (kind: builds or finds its node image for
// version) once, as the matrix does for its cells; its output goes to <out>/prepare-<provider>.log.
func prepareHost(ctx context.Context, root, provider, version, out string) error {
	path := filepath.Join(out, "prepare-"+provider+".log")
	log, err := os.Create(path) //nolint:gosec // G304: a log in the output directory the caller chose
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }() // written through
	fmt.Printf("e2e: preparing this host for %s clusters of Kubernetes %s (log: %s) …\n", provider, version, suiterun.DisplayPath(path))
	if err := (matrix.Commands{Root: root}).Prepare(ctx, version, provider, log); err != nil {
		return fmt.Errorf("preparing this host for %s (see %s): %w", provider, suiterun.DisplayPath(path), err)
	}
	return nil
}
