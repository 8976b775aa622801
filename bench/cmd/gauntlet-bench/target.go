package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gauntlet-dev/gauntlet/bench/benchmark"
	"github.com/gauntlet-dev/gauntlet/bench/result"
	"github.com/gauntlet-dev/gauntlet/bench/testbed"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// abTargetRun is what `gauntlet-bench ab --target` was asked.
type abTargetRun struct {
	name, baseVersion, root, out, run, cluster string
	keep                                       bool
	cfg                                        benchmark.Config
	cmp                                        *comparison
	setBoth, setA, setB                        stringList
	valuesA, valuesB                           map[string]any
	// directRatesSet says --direct-rates was given: the direct ladders attack gauntlet's
	// operator's own paths, so for a target rates are an error rather than silently ignored
	// ("none" is fine).
	directRatesSet bool
}

// abSides loads the target and its description at baseVersion: side A, then side B. A version
// the proxy does not serve fails here, before anything is built, naming the served ones.
func abSides(ctx context.Context, name, baseVersion string) (a, b *target.Target, err error) {
	path, err := suite.TargetPath(name)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--target: %w", err)}
	}
	b, err = target.Load(path)
	if err != nil {
		return nil, nil, err
	}
	if b.Version() == "" {
		return nil, nil, usageError{fmt.Errorf("--target %s: its description builds it from a source directory or runs prebuilt images, not from a Go module version, "+
			"so it has no --base-version to compare (compare revisions of gauntlet's own operator with --base-ref)", b.Name)}
	}
	if a, err = b.AtVersion(ctx, baseVersion); err != nil {
		return nil, nil, fmt.Errorf("--base-version %s: %w", baseVersion, err)
	}
	return a, b, nil
}

// sideName is what a side of a target's run is called: "<target> <version>".
func sideName(t *target.Target) string { return t.Name + " " + t.Version() }

// sideTarget is Result.Target of a side: the target and its module version.
func sideTarget(t *target.Target) string {
	return t.Name + " " + t.Source.Module.Path + "@" + t.Version()
}

// abTarget measures the target at --base-version (side A) against the description's version
// (side B), a local cluster each, loaded in turns, and exits 1 when side B regressed.
func abTarget(ctx context.Context, r abTargetRun) error {
	if r.directRatesSet && len(r.cfg.DirectRates) > 0 {
		return usageError{errors.New("--direct-rates: the direct ladders attack the paths of gauntlet's own operator; a target is measured through the API server only (--apiserver-rates)")}
	}
	a, b, err := abSides(ctx, r.name, r.baseVersion)
	if err != nil {
		return err
	}
	revision, err := result.GitRevision(ctx, r.root)
	if err != nil {
		return fmt.Errorf("reading the bench's revision: %w", err)
	}
	cfg := r.cfg
	cfg.DirectRates = nil
	if r.run == "" {
		r.run = time.Now().UTC().Format("20060102-150405") + "-ab-" + b.Name
	}
	dir := filepath.Join(r.out, r.run)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("creating run directory %s: %w", dir, err)
	}
	cfg.Progress = os.Stderr
	aa := ""
	if a.Version() == b.Version() {
		aa = " (A/A: the same version on both sides)"
	}
	fmt.Fprintf(os.Stderr, "gauntlet-bench: A/B run %s of target %s — side A: %s, side B: %s%s; %d API-server rates, "+
		"each side's ladder, control and floor in turns (A B, control A, control B, floor A, floor B, then back) in %d segments of %s per ladder "+
		"(warm-up %s before a ladder's first, %s before the others); attacks take ≈ %s\n",
		r.run, b.Name, sideName(a), sideName(b), aa, len(cfg.APIServerRates), cfg.Segments, cfg.Duration/time.Duration(cfg.Segments),
		cfg.Warmup, cfg.SegmentWarmup, cfg.EstimateAB(true, 1).Round(time.Second))
	started := time.Now()
	pair, err := testbed.StartTargetAB(ctx, testbed.LocalOptions{ClusterName: r.cluster, Keep: r.keep, Progress: os.Stderr},
		testbed.TargetSide{Name: sideName(a), Target: a, Values: r.valuesA}, testbed.TargetSide{Name: sideName(b), Target: b, Values: r.valuesB})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "• testbed ready (%.1fs)\n", time.Since(started).Seconds())
	cfg.ChartValues = r.setBoth
	return measureAB(ctx, pair, cfg, r.run, benchmark.ABRevisions{A: revision, B: revision, TargetA: sideTarget(a), TargetB: sideTarget(b)},
		abValues{both: r.setBoth, a: r.setA, b: r.setB}, r.cmp, dir, started)
}

// flagSet reports whether the flag called name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
