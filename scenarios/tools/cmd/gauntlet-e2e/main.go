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
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/matrix"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/suiterun"

	// Every cluster provider: their footprints and host preparation.
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers"
)

func main() {
	suites := flag.String("suites", "", "suites under e2e/, space-separated: those with no recorded time start first, in this order, then the others longest first by their last times on this machine and provider (kept in "+durationsPath("<provider>")+" by runs of whole suites)")
	jobs := flag.String("jobs", "", "how many suites run at once (E2E_JOBS; default: what the machine holds)")
	provider := flag.String("provider", cluster.DefaultProvider, "the suites' provider (PROVIDER), for the default of -jobs and the capacity check; pass --provider to the suites too")
	version := flag.String("kubernetes-version", suite.DefaultKubernetesVersion, "the suites' Kubernetes version (K8S_VERSION): kind's node image is built for it first")
	timeout := flag.String("timeout", "30m", "go test -timeout of each suite")
	out := flag.String("out", "_output/e2e", "the suites' report directory (their --e2e-output): each suite's log goes to <out>/<suite>/"+suiterun.LogFile)
	flag.Parse()
	os.Exit(run(strings.Fields(*suites), *jobs, *provider, *version, *timeout, *out, flag.Args()))
}

func run(suites []string, jobsArg, provider, version, timeout, out string, suiteArgs []string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
		return 2
	}
	if len(suites) == 0 {
		return fail("no suites to run (-suites)")
	}
	root, err := workspace.Root()
	if err != nil {
		return fail("%v", err)
	}
	if out, err = filepath.Abs(out); err != nil {
		return fail("%v", err)
	}
	p, err := cluster.Lookup(provider)
	if err != nil {
		return fail("%v", err)
	}
	machine, err := suiterun.ReadMachine()
	if err != nil {
		return fail("reading this machine's capacity: %v", err)
	}
	jobs, why := suiterun.DefaultJobs(p.Footprint, machine, len(suites)), "what this machine holds"
	if jobsArg != "" {
		if jobs, err = strconv.Atoi(jobsArg); err != nil || jobs < 1 {
			return fail("E2E_JOBS=%s: give a number of suites, at least 1", jobsArg)
		}
		why = "E2E_JOBS"
	}
	if p.Footprint.SharedCluster && jobs > 1 {
		return fail("E2E_JOBS=%d with PROVIDER=%s: every suite would use its one cluster, and a suite refuses a cluster holding another suite's release; run them one after another (E2E_JOBS=1)", jobs, provider)
	}
	if err := suiterun.CheckCapacity("E2E_JOBS", jobs, provider, p.Footprint, machine); err != nil {
		lines := "  - " + strings.ReplaceAll(err.Error(), "\n", "\n  - ")
		if jobs > 1 {
			return fail("this machine cannot hold %d %s suites at once:\n%s", jobs, provider, lines)
		}
		fmt.Fprintf(os.Stderr, "e2e: ⚠ this machine is short of what even one %s suite may need; running one at a time anyway:\n%s\n", provider, lines)
	}
	if err := os.MkdirAll(out, 0o750); err != nil {
		return fail("%v", err)
	}

	// With fewer slots than suites, the longest suite started last would run on alone.
	durationsFile := durationsPath(provider)
	durations, err := suiterun.ReadDurations(durationsFile)
	if err != nil {
		return fail("reading the suites' last times: %v", err)
	}
	suites = durations.LongestFirst(suites)

	var display suiterun.Display = suiterun.Plain{W: os.Stdout}
	if fd := int(os.Stdout.Fd()); term.IsTerminal(fd) {
		width, _, _ := term.GetSize(fd)
		display = &suiterun.Live{W: os.Stdout, Width: width}
	}
	r := suiterun.New(suiterun.Options{
		Suites: suites, Jobs: jobs, Output: out, Display: display,
		Command: suiterun.GoTest(root, timeout, suiteArgs),
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
		if err := prepareHost(ctx, root, provider, version, out); err != nil {
			return fail("%v", err)
		}
	}

	fmt.Printf("e2e: %d suites on %s, %d at once (%s; %d cores, %.1f GiB free), longest first by their last times (%s): %s; each suite's log: %s\n",
		len(suites), provider, jobs, why, machine.Cores, machine.Memory.Free/(1<<30), suiterun.DisplayPath(durationsFile), strings.Join(suites, " "),
		filepath.Join(suiterun.DisplayPath(out), "<suite>", suiterun.LogFile))
	start := time.Now()
	states := r.Run(ctx)
	var sum time.Duration
	failed := false
	for _, s := range states {
		sum += s.Elapsed(s.Ended)
		failed = failed || !s.OK()
	}
	fmt.Printf("e2e: %d suites in %s, up to %d at once (their own times add up to %s)\n",
		len(states), time.Since(start).Round(time.Second), jobs, sum.Round(time.Second))
	// An interrupted run's suites ended early, and a run of some scenarios is short: their times
	// would mislead the next run's order.
	if ctx.Err() == nil && !selectsScenarios(suiteArgs) {
		if err := durations.Record(durationsFile, states); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: ⚠ keeping the suites' times for the next run's order: %v\n", err)
		}
	}
	suiterun.WriteFailures(os.Stdout, states, out)
	if failed {
		return 1
	}
	return 0
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
