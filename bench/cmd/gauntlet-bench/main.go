// Command gauntlet-bench measures the operator's admission webhook latency and
// guards it against regressions.
//
//	gauntlet-bench run [flags]                                   # make bench
//	gauntlet-bench run --baseline bench/baselines/local-2core.json  # make bench-compare BASE=…
//	gauntlet-bench compare --base <result.json> --current <result.json>
//	gauntlet-bench trend [--out DIR] DIR...                       # make bench-trend RESULTS=…
//
// run brings up a testbed (a local cluster with the chart installed, or
// envtest with the operator as a subprocess for --smoke), runs the rate
// ladders and writes _output/bench/<run>/{result.json,report.md,*.svg}.
// compare exits 1 when the current run regressed beyond the tolerances. trend
// reads every result.json in the directories (and one level below) and writes
// trend.md and trend.svg: each step's p50 and p99 across the runs, oldest first.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gauntlet-dev/gauntlet/bench/benchmark"
	"github.com/gauntlet-dev/gauntlet/bench/load"
	"github.com/gauntlet-dev/gauntlet/bench/report"
	"github.com/gauntlet-dev/gauntlet/bench/result"
	"github.com/gauntlet-dev/gauntlet/bench/testbed"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// Exit codes: 1 is a regression (or a failed run), 2 a usage error.
const (
	exitFailed = 1
	exitUsage  = 2
)

// errRegressed marks a comparison that failed, as opposed to a run that broke.
var errRegressed = errors.New("regression against the baseline")

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(exitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "run":
		err = runCommand(ctx, os.Args[2:])
	case "ab":
		err = abCommand(ctx, os.Args[2:])
	case "compare":
		err = compareCommand(os.Args[2:])
	case "trend":
		err = trendCommand(os.Args[2:])
	case "-h", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "gauntlet-bench: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(exitUsage)
	}
	var ue usageError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "gauntlet-bench:", err)
		os.Exit(exitUsage)
	case errors.Is(err, errRegressed):
		os.Exit(exitFailed)
	default:
		fmt.Fprintln(os.Stderr, "gauntlet-bench:", err)
		os.Exit(exitFailed)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  gauntlet-bench run [--smoke] [--provider local|envtest] [--baseline result.json] [flags]
  gauntlet-bench ab --base-ref REF [--set-a V] [--set-b V] [flags]
  gauntlet-bench ab --target NAME --base-version V [--set-a V] [--set-b V] [flags]
  gauntlet-bench compare [--ab] --base result.json --current result.json [tolerance flags]
  gauntlet-bench trend [--out DIR] DIR...
Run "gauntlet-bench <command> -h" for the flags.
`)
}

type usageError struct{ error }

// comparison holds the flags shared by run and compare.
type comparison struct {
	tol   result.Tolerances
	match string
}

// validate rejects comparison flags that cannot work, before any measuring.
func (c *comparison) validate() error {
	if _, err := regexp.Compile(c.match); err != nil {
		return usageError{fmt.Errorf("--match: %w", err)}
	}
	if a := c.tol.Alpha; !(a > 0 && a <= 1) {
		return usageError{fmt.Errorf("--alpha=%v: must be in (0, 1]", a)}
	}
	return nil
}

// compare judges current against base, both narrowed to the selected steps.
func (c *comparison) compare(base, current result.Result) (result.Comparison, error) {
	if err := c.validate(); err != nil {
		return result.Comparison{}, err
	}
	var re *regexp.Regexp
	if c.match != "" {
		re = regexp.MustCompile(c.match)
	}
	return result.Compare(benchmark.Select(base, re), benchmark.Select(current, re), c.tol), nil
}

// compareAB judges side B against side A of one run (result.CompareAB), both
// narrowed to the selected steps; steps whose p50 exceeded saturation are
// reported, not judged.
func (c *comparison) compareAB(a, b result.Result, saturation time.Duration) (result.Comparison, error) {
	if err := c.validate(); err != nil {
		return result.Comparison{}, err
	}
	var re *regexp.Regexp
	if c.match != "" {
		re = regexp.MustCompile(c.match)
	}
	return result.CompareAB(benchmark.Select(a, re), benchmark.Select(b, re), c.tol, float64(saturation)/float64(time.Millisecond)), nil
}

// comparisonFlags binds the comparison flags, defaulting to Compare's tolerances.
func comparisonFlags(fs *flag.FlagSet) *comparison {
	return comparisonFlagsFrom(fs, result.DefaultTolerances())
}

// comparisonFlagsFrom binds the comparison flags with the given defaults.
func comparisonFlagsFrom(fs *flag.FlagSet, tol result.Tolerances) *comparison {
	c := &comparison{tol: tol}
	t := &c.tol
	fs.StringVar(&c.match, "match", "", "Compare only steps whose \"name@rate\" matches this regexp, e.g. '^(direct/|apiserver/.*@(50|100)\\b)'.")
	fs.Float64Var(&t.P99Ratio, "p99-ratio", t.P99Ratio, "Allowed relative p99 growth over the baseline (1 = +100%; inf: p99 never fails).")
	fs.Float64Var(&t.P99FloorMs, "p99-floor-ms", t.P99FloorMs, "p99 growth in ms that is never a regression, whatever the ratio.")
	fs.Float64Var(&t.P50Ratio, "p50-ratio", t.P50Ratio, "Allowed relative p50 growth over the baseline (0.5 = +50%).")
	fs.Float64Var(&t.P50FloorMs, "p50-floor-ms", t.P50FloorMs, "p50 growth in ms that is never a regression, whatever the ratio.")
	fs.Float64Var(&t.SuccessDrop, "success-drop", t.SuccessDrop, "Allowed absolute drop of the success ratio (0.001 = 0.1 points).")
	fs.Float64Var(&t.Alpha, "alpha", t.Alpha, "Significance a p99 or p50 growth must reach in a one-sided rank test over the steps' windows (1: no test).")
	return c
}

// parseFlags parses args, which must hold flags only, into fs. help says the
// user asked for the flags' usage (printed by fs): the command has nothing
// more to do. Anything wrong is a usageError.
func parseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, usageError{err}
	}
	if fs.NArg() > 0 {
		return false, usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	return false, nil
}

// ladderSettings holds the flags that shape the rate ladders, shared by run and ab.
type ladderSettings struct {
	directRates, apiRates                 *string
	warmup, duration, saturation          *time.Duration
	windows                               *int
	invalid, directTarget, overheadTarget *float64
	floorGoal                             *float64
}

// ladderFlags binds the ladder flags, their defaults taken from def.
func ladderFlags(fs *flag.FlagSet, def benchmark.Config) *ladderSettings {
	return &ladderSettings{
		directRates:    fs.String("direct-rates", "", "Direct ladder rates in req/s, comma-separated; \"none\" skips (default "+joinRates(def.DirectRates)+")."),
		apiRates:       fs.String("apiserver-rates", "", "Through-the-API-server ladder rates in req/s; \"none\" skips (default "+joinRates(def.APIServerRates)+")."),
		warmup:         fs.Duration("warmup", 0, "Uncounted warm-up before every step (default "+def.Warmup.String()+")."),
		duration:       fs.Duration("duration", 0, "Measured length of every step (default "+def.Duration.String()+")."),
		windows:        fs.Int("windows", def.Windows, "Equal time slices every measured step is cut into; comparisons rank their percentiles."),
		saturation:     fs.Duration("saturation-p50", def.SaturationP50, "End a ladder after a step whose p50 exceeds this (0: run every rate)."),
		invalid:        fs.Float64("invalid-ratio", def.InvalidRatio, "Fraction of direct requests carrying an invalid DynamoGraphDeployment."),
		directTarget:   fs.Float64("direct-p99-target", def.DirectP99TargetMs, "Direct p99 target in ms; the report names the highest rate under it."),
		overheadTarget: fs.Float64("overhead-p99-target", def.OverheadP99TargetMs, "Target in ms for the p99 the webhooks add through the API server."),
		floorGoal: fs.Float64("floor-ratio-goal", def.FloorRatioGoal,
			"Goal for the webhooks' overhead as a multiple of the floor's (and the patching floor's), at p50 and p99; the report judges every rate against it."),
	}
}

// apply sets the flags given on cfg, rejecting values that cannot work.
func (l *ladderSettings) apply(cfg *benchmark.Config) error {
	var err error
	if *l.directRates != "" {
		if cfg.DirectRates, err = parseRates(*l.directRates); err != nil {
			return usageError{fmt.Errorf("--direct-rates: %w", err)}
		}
	}
	if *l.apiRates != "" {
		if cfg.APIServerRates, err = parseRates(*l.apiRates); err != nil {
			return usageError{fmt.Errorf("--apiserver-rates: %w", err)}
		}
	}
	if *l.warmup > 0 {
		cfg.Warmup = *l.warmup
	}
	if *l.duration > 0 {
		cfg.Duration = *l.duration
	}
	cfg.InvalidRatio, cfg.DirectP99TargetMs, cfg.OverheadP99TargetMs = *l.invalid, *l.directTarget, *l.overheadTarget
	if cfg.FloorRatioGoal = *l.floorGoal; cfg.FloorRatioGoal < 1 {
		return usageError{fmt.Errorf("--floor-ratio-goal=%v: must be at least 1 (the floor's own overhead)", cfg.FloorRatioGoal)}
	}
	cfg.SaturationP50 = *l.saturation
	cfg.Windows = *l.windows
	if cfg.Windows < 1 {
		return usageError{fmt.Errorf("--windows=%d: must be at least 1", cfg.Windows)}
	}
	if cfg.InvalidRatio < 0 || cfg.InvalidRatio > 1 {
		return usageError{fmt.Errorf("--invalid-ratio=%v: must be between 0 and 1", cfg.InvalidRatio)}
	}
	return nil
}

func runCommand(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gauntlet-bench run", flag.ContinueOnError)
	def := benchmark.Defaults()
	smoke := fs.Bool("smoke", false, "Seconds-long run on envtest (two rates per ladder, 1s each): proves the pipeline, not the latency.")
	provider := fs.String("provider", "", "Where the operator runs: local (a local cluster with the chart; default) or envtest (operator subprocess; the --smoke default).")
	out := fs.String("out", filepath.Join("_output", "bench"), "Directory of run directories.")
	run := fs.String("run", "", "Run name, the run directory's name (default: UTC time, e.g. 20251121-101500).")
	ladders := ladderFlags(fs, def)
	var sets stringList
	fs.Var(&sets, "set", "Chart value, as helm --set (repeatable), e.g. --set webhook.latencyInjection=5ms.")
	baseline := fs.String("baseline", "", "Compare with this result.json, add the comparison to the report, exit 1 on regression.")
	cmpFlags := comparisonFlags(fs)
	cluster := fs.String("cluster-name", "gauntlet-bench", "Local cluster name (local provider).")
	keep := fs.Bool("keep-cluster", false, "Leave the local cluster running afterwards.")
	pprofRate := fs.Float64("pprof-rate", 0, "envtest only: capture an operator CPU profile during the direct validate step at this rate.")
	apiPprofRate := fs.Float64("apiserver-pprof-rate", 0, "Capture an API server CPU profile during the webhook dry-run step at this rate.")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}

	cfg := def
	if *smoke {
		cfg = benchmark.Smoke()
	}
	if *provider == "" {
		*provider = "local"
		if *smoke {
			*provider = "envtest"
		}
	}
	if err := ladders.apply(&cfg); err != nil {
		return err
	}
	values, err := testbed.ParseValues(sets)
	if err != nil {
		return usageError{err}
	}
	if err := cmpFlags.validate(); err != nil {
		return err
	}
	var base *result.Result
	if *baseline != "" {
		b, err := result.Read(*baseline)
		if err != nil {
			return err
		}
		base = &b
	}
	if *run == "" {
		*run = time.Now().UTC().Format("20060102-150405")
		if *smoke {
			*run += "-smoke"
		}
	}
	dir := filepath.Join(*out, *run)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("creating run directory %s: %w", dir, err)
	}
	cfg.Progress = os.Stderr
	if *pprofRate > 0 {
		if *provider != "envtest" {
			return usageError{errors.New("--pprof-rate needs --provider=envtest: the chart does not expose the operator's pprof flag")}
		}
		cfg.ProfileRate = *pprofRate
	}
	cfg.APIServerProfileRate, cfg.ProfileDir = *apiPprofRate, dir

	fmt.Fprintf(os.Stderr, "gauntlet-bench: run %s on %s — %d direct and %d API-server rates, %s warm-up + %s each; attacks take ≈ %s\n",
		*run, *provider, len(cfg.DirectRates), len(cfg.APIServerRates), cfg.Warmup, cfg.Duration, cfg.Estimate().Round(time.Second))
	started := time.Now()
	var tb *testbed.Testbed
	switch *provider {
	case "local":
		tb, err = testbed.StartLocal(ctx, testbed.LocalOptions{ClusterName: *cluster, Values: values, Keep: *keep, Progress: os.Stderr})
	case "envtest":
		tb, err = testbed.StartEnvtest(ctx, testbed.EnvtestOptions{Values: values, WorkDir: dir, Pprof: *pprofRate > 0, Progress: os.Stderr})
	default:
		return usageError{fmt.Errorf("--provider=%q: want local or envtest", *provider)}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "• testbed ready (%.1fs)\n", time.Since(started).Seconds())

	cfg.ChartValues = sets
	res, measureErr := benchmark.Run(ctx, tb, cfg, *run)
	closeErr := tb.Close(context.WithoutCancel(ctx))
	if measureErr != nil {
		return errors.Join(measureErr, closeErr)
	}
	if closeErr != nil {
		return closeErr
	}

	var cmp *result.Comparison
	if base != nil {
		c, err := cmpFlags.compare(*base, res)
		if err != nil {
			return err
		}
		cmp = &c
	}
	files, err := benchmark.Write(dir, res, cfg, cmp)
	if err != nil {
		return err
	}
	latest := filepath.Join(*out, "latest")
	_ = os.Remove(latest)
	if err := os.Symlink(*run, latest); err != nil {
		fmt.Fprintf(os.Stderr, "• could not point %s at the run: %v\n", latest, err)
	}
	benchmark.Summarize(os.Stderr, res, cfg)
	fmt.Fprintf(os.Stderr, "✓ run %s done in %s:\n", *run, time.Since(started).Round(time.Second))
	for _, f := range files {
		fmt.Fprintln(os.Stderr, "  "+f)
	}
	if cmp != nil {
		if err := report.ComparisonText(os.Stdout, *cmp); err != nil {
			return err
		}
		if cmp.Failed() {
			return errRegressed
		}
	}
	return nil
}

// abCommand measures the operator and chart at --base-ref (side A) against the working tree
// (side B) in one local cluster, interleaved, and exits 1 when side B regressed.
func abCommand(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gauntlet-bench ab", flag.ContinueOnError)
	def := benchmark.ABDefaults()
	baseRef := fs.String("base-ref", "", "Git reference of side A, the base (a branch, tag or commit); side B is the working tree, uncommitted changes included.")
	targetName := fs.String("target", "", "Compare two versions of a target instead (a name under scenarios/targets, or a path to a description): side A at --base-version, side B at the description's version, each in a local cluster of its own.")
	baseVersion := fs.String("base-version", "", "With --target: side A's version of the target's Go module, one the Go module proxy serves (e.g. v3.17.0); the description's own version is an A/A run.")
	out := fs.String("out", filepath.Join("_output", "bench"), "Directory of run directories.")
	run := fs.String("run", "", "Run name, the run directory's name (default: UTC time with an -ab suffix).")
	settings := ladderFlags(fs, def)
	segments := fs.Int("segments", def.Segments, "Segments each side of a step is measured in, the sides taking turns (A B B A A B B A …); even, at least 2.")
	segmentWarmup := fs.Duration("segment-warmup", def.SegmentWarmup, "Uncounted warm-up before every segment but a side's first (which gets --warmup).")
	var setBoth, setA, setB stringList
	fs.Var(&setBoth, "set", "Chart value for both sides, as helm --set (repeatable).")
	fs.Var(&setA, "set-a", "Chart value for side A only (repeatable).")
	fs.Var(&setB, "set-b", "Chart value for side B only (repeatable), e.g. --set-b webhook.latencyInjection=1ms: the comparison must fail.")
	cmpFlags := comparisonFlagsFrom(fs, result.DefaultABTolerances())
	cluster := fs.String("cluster-name", "gauntlet-bench-ab", "Local cluster name.")
	keep := fs.Bool("keep-cluster", false, "Leave the local cluster running afterwards.")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	cfg := def
	if *targetName != "" || *baseVersion != "" {
		if *baseRef != "" {
			return usageError{errors.New("--base-ref compares two revisions of gauntlet's operator, --target two versions of a target: give one")}
		}
		if *targetName == "" || *baseVersion == "" {
			return usageError{errors.New("--target and --base-version go together: make bench-compare TARGET=gatekeeper BASE_VERSION=v3.17.0")}
		}
	} else if *baseRef == "" {
		return usageError{errors.New("--base-ref is required: the git reference side A is built from (make bench-compare BASE_REF=main)")}
	}
	if err := settings.apply(&cfg); err != nil {
		return err
	}
	if !load.ValidSegments(*segments) {
		return usageError{fmt.Errorf("--segments=%d: must be even and at least 2 (the sides take turns in pairs: A B B A)", *segments)}
	}
	if *segmentWarmup < 0 {
		return usageError{fmt.Errorf("--segment-warmup=%s: must not be negative", *segmentWarmup)}
	}
	cfg.Segments, cfg.SegmentWarmup = *segments, *segmentWarmup
	if err := cmpFlags.validate(); err != nil {
		return err
	}
	valuesA, err := testbed.ParseValues(append(slices.Clone(setBoth), setA...))
	if err != nil {
		return usageError{err}
	}
	valuesB, err := testbed.ParseValues(append(slices.Clone(setBoth), setB...))
	if err != nil {
		return usageError{err}
	}
	root, err := workspace.Root()
	if err != nil {
		return err
	}
	if *targetName != "" {
		return abTarget(ctx, abTargetRun{name: *targetName, baseVersion: *baseVersion, root: root, out: *out, run: *run, cluster: *cluster, keep: *keep,
			cfg: cfg, cmp: cmpFlags, setBoth: setBoth, setA: setA, setB: setB, valuesA: valuesA, valuesB: valuesB, directRatesSet: flagSet(fs, "direct-rates")})
	}
	revB, err := result.GitRevision(ctx, root)
	if err != nil {
		return fmt.Errorf("reading the working tree's revision (side B): %w", err)
	}
	base, err := testbed.CheckoutRef(ctx, *baseRef)
	if err != nil {
		return err
	}
	defer func() {
		if err := base.Remove(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(os.Stderr, "gauntlet-bench: removing the worktree of side A: %v\n", err)
		}
	}()
	if *run == "" {
		*run = time.Now().UTC().Format("20060102-150405") + "-ab"
	}
	dir := filepath.Join(*out, *run)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("creating run directory %s: %w", dir, err)
	}
	cfg.Progress = os.Stderr
	nameA := fmt.Sprintf("BASE_REF=%s (%s)", base.Ref, shortRev(base.Revision))
	nameB := "the working tree (" + shortRev(revB) + ")"
	fmt.Fprintf(os.Stderr, "gauntlet-bench: A/B run %s — side A: %s, side B: %s; %d direct and %d API-server rates, "+
		"the sides, the control and the floors in turns (A B control floor floor-patching floor-direct, then back) in %d segments of %s per ladder "+
		"(warm-up %s before a ladder's first, %s before the others); attacks take ≈ %s\n",
		*run, nameA, nameB, len(cfg.DirectRates), len(cfg.APIServerRates), cfg.Segments, cfg.Duration/time.Duration(cfg.Segments),
		cfg.Warmup, cfg.SegmentWarmup, cfg.EstimateAB(false, 3).Round(time.Second))
	if strings.HasSuffix(revB, "-dirty") {
		fmt.Fprintf(os.Stderr, "• the working tree has uncommitted changes: they are measured on side B\n")
	}
	started := time.Now()
	pair, err := testbed.StartLocalAB(ctx, testbed.LocalOptions{ClusterName: *cluster, Keep: *keep, Progress: os.Stderr},
		testbed.Side{Name: nameA, Root: base.Root, Values: valuesA}, testbed.Side{Name: nameB, Values: valuesB})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "• testbed ready (%.1fs)\n", time.Since(started).Seconds())
	cfg.ChartValues = setBoth
	return measureAB(ctx, pair, cfg, *run, benchmark.ABRevisions{A: base.Revision, B: revB}, abValues{both: setBoth, a: setA, b: setB}, cmpFlags, dir, started)
}

// abValues are the --set values of an A/B run: for both sides, and for each side alone.
type abValues struct{ both, a, b []string }

// measureAB measures both sides of pair (benchmark.RunAB), closes the pair, judges B against A
// with cmp, writes the results and report into dir and prints the verdict; errRegressed when B
// regressed.
func measureAB(ctx context.Context, pair *testbed.Pair, cfg benchmark.Config, run string, revs benchmark.ABRevisions, values abValues,
	cmp *comparison, dir string, started time.Time) error {
	a, b, measureErr := benchmark.RunAB(ctx, pair, cfg, run, revs)
	closeErr := pair.Close(context.WithoutCancel(ctx))
	if err := errors.Join(measureErr, closeErr); err != nil {
		return err
	}
	a.Settings["chartValues"] = strings.Join(append(slices.Clone(values.both), values.a...), ",")
	b.Settings["chartValues"] = strings.Join(append(slices.Clone(values.both), values.b...), ",")
	c, err := cmp.compareAB(a, b, cfg.SaturationP50)
	if err != nil {
		return err
	}
	files, err := benchmark.WriteAB(dir, a, b, cfg, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "✓ A/B run %s done in %s:\n", run, time.Since(started).Round(time.Second))
	for _, f := range files {
		fmt.Fprintln(os.Stderr, "  "+f)
	}
	if err := report.ComparisonText(os.Stdout, c); err != nil {
		return err
	}
	if c.Failed() {
		return errRegressed
	}
	return nil
}

// shortRev is a revision's first 12 characters, keeping a "-dirty" suffix.
func shortRev(rev string) string {
	head, dirty := strings.CutSuffix(rev, "-dirty")
	if len(head) > 12 {
		head = head[:12]
	}
	if dirty {
		head += "-dirty"
	}
	return head
}

func compareCommand(args []string) error {
	fs := flag.NewFlagSet("gauntlet-bench compare", flag.ContinueOnError)
	basePath := fs.String("base", "", "Baseline result.json (e.g. bench/baselines/local-2core.json).")
	currentPath := fs.String("current", "", "Current result.json (e.g. _output/bench/latest/result.json).")
	markdown := fs.String("markdown", "", "Also write the comparison as Markdown to this file (for a CI summary); with --ab, the whole A/B report "+
		"(each side's floor ratios against --floor-ratio-goal, the comparison, side B's ratio against side A's, the floor tables).")
	floorGoal := fs.Float64("floor-ratio-goal", benchmark.Defaults().FloorRatioGoal, "With --ab and --markdown: the goal the floor ratios are judged against.")
	ab := fs.Bool("ab", false, "The two results are side A (--base) and side B (--current) of one A/B run (gauntlet-bench ab's a/ and b/): "+
		"judge them as the A/B run does (paired windows, and the A/B run's tolerances where no flag sets one), e.g. again with other tolerances.")
	saturation := fs.Duration("saturation-p50", benchmark.Defaults().SaturationP50, "With --ab: steps whose p50 exceeds this on either side are reported, not judged.")
	cmpFlags := comparisonFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err}
	}
	if *ab {
		// The A/B run's tolerances, with the flags given on the command line over them.
		abFlags := flag.NewFlagSet("ab tolerances", flag.ContinueOnError)
		cmpFlags = comparisonFlagsFrom(abFlags, result.DefaultABTolerances())
		var setErr error
		fs.Visit(func(f *flag.Flag) {
			if abFlags.Lookup(f.Name) != nil {
				setErr = errors.Join(setErr, abFlags.Set(f.Name, f.Value.String()))
			}
		})
		if setErr != nil {
			return usageError{setErr}
		}
	}
	if *basePath == "" || *currentPath == "" || fs.NArg() > 0 {
		return usageError{errors.New("compare needs --base and --current, and nothing else")}
	}
	if *floorGoal < 1 {
		return usageError{fmt.Errorf("--floor-ratio-goal=%v: must be at least 1 (the floor's own overhead)", *floorGoal)}
	}
	base, err := result.Read(*basePath)
	if err != nil {
		return err
	}
	cur, err := result.Read(*currentPath)
	if err != nil {
		return err
	}
	compare := cmpFlags.compare
	if *ab {
		compare = func(a, b result.Result) (result.Comparison, error) { return cmpFlags.compareAB(a, b, *saturation) }
	}
	c, err := compare(base, cur)
	if err != nil {
		return err
	}
	if err := report.ComparisonText(os.Stdout, c); err != nil {
		return err
	}
	if *markdown != "" {
		write := func(w io.Writer) error { return report.ComparisonMarkdown(w, c) }
		if *ab {
			cfg := benchmark.ABDefaults()
			cfg.FloorRatioGoal = *floorGoal
			sideReports := [2]string{sideReport(*markdown, *basePath), sideReport(*markdown, *currentPath)}
			write = func(w io.Writer) error { return report.ABMarkdown(w, c, base, cur, cfg.Floors(base), sideReports) }
		}
		f, err := os.Create(*markdown)
		if err != nil {
			return err
		}
		if err := errors.Join(write(f), f.Close()); err != nil {
			return fmt.Errorf("writing %s: %w", *markdown, err)
		}
	}
	if c.Failed() {
		return errRegressed
	}
	return nil
}

// sideReport is the path, from the directory of the report at reportPath, to
// the report beside a side's result (resultPath).
func sideReport(reportPath, resultPath string) string {
	side := filepath.Join(filepath.Dir(resultPath), report.ReportFile)
	if rel, err := filepath.Rel(filepath.Dir(reportPath), side); err == nil {
		return filepath.ToSlash(rel)
	}
	return side
}

func parseRates(s string) ([]float64, error) {
	if s == "none" {
		return nil, nil
	}
	var out []float64
	for _, part := range strings.Split(s, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || r < 1 || r != float64(int(r)) {
			return nil, fmt.Errorf("rate %q: want a whole number of requests per second ≥ 1", part)
		}
		if len(out) > 0 && r <= out[len(out)-1] {
			return nil, fmt.Errorf("rates must ascend: %g after %g", r, out[len(out)-1])
		}
		out = append(out, r)
	}
	return out, nil
}

func joinRates(rates []float64) string {
	parts := make([]string, len(rates))
	for i, r := range rates {
		parts[i] = strconv.FormatFloat(r, 'f', -1, 64)
	}
	return strings.Join(parts, ",")
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// trendCommand renders the latency trend of the runs found in the directories.
func trendCommand(args []string) error {
	fs := flag.NewFlagSet("trend", flag.ContinueOnError)
	out := fs.String("out", "", "where to write trend.md and trend.svg (default: the first directory)")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() == 0 {
		return usageError{errors.New("trend: name at least one directory of results (result.json, or <run>/result.json)")}
	}
	runs, err := result.ReadAll(fs.Args()...)
	if err != nil {
		return err
	}
	if *out == "" {
		*out = fs.Arg(0)
	}
	if err := os.MkdirAll(*out, 0o750); err != nil {
		return err
	}
	for name, render := range map[string]func(io.Writer, []result.Result) error{"trend.md": report.TrendMarkdown, "trend.svg": report.TrendSVG} {
		var b bytes.Buffer
		if err := render(&b, runs); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, name), b.Bytes(), 0o600); err != nil {
			return err
		}
	}
	fmt.Printf("gauntlet-bench: trend of %d runs → %s, %s\n", len(runs), filepath.Join(*out, "trend.md"), filepath.Join(*out, "trend.svg"))
	return nil
}
