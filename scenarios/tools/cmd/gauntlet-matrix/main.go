// Command gauntlet-matrix runs the e2e suites over Kubernetes versions × providers × suites,
// -jobs cells at once (default one after another), and writes one report. `make e2e-matrix` runs it:
//
//	go run ./scenarios/tools/cmd/gauntlet-matrix -versions "v1.37.0" -providers "local kind" -suites "hostile autocert" -out _output/matrix
//
// Empty lists mean all that are supported. -stress N runs every cell's suite beside N CPU-bound
// worker processes (its --stress; make STRESS=N), and the report says so. It prints a progress line per cell, writes
// <out>/report.md (the grid) and <out>/result.json, and exits 1 when a cell failed or did not
// start, 2 on bad input (an unknown version, provider or suite: the message lists what is
// supported) or when the report cannot be written. With -merge it runs nothing and writes one
// report of the results of earlier runs (the nightly workflow's jobs):
//
//	go run ./scenarios/tools/cmd/gauntlet-matrix -merge "_output/matrix-parts/a _output/matrix-parts/b" -out _output/matrix
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers" // Prepare asks the provider what the host needs
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/matrix"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/suiterun"
)

func main() {
	versions := flag.String("versions", "", "Kubernetes versions, space- or comma-separated (default: every supported one)")
	providers := flag.String("providers", "", "providers: local, kind (default: both)")
	suites := flag.String("suites", "", "suites under e2e/ (default: all)")
	out := flag.String("out", "_output/matrix", "output directory (emptied first)")
	stress := flag.String("stress", "", "CPU-bound worker processes beside every cell's suite (its --stress; default 0)")
	jobs := flag.Int("jobs", 1, "cells at once, at most (MATRIX_JOBS); checked against this machine's free memory, open files and inotify room first")
	merge := flag.String("merge", "", "run nothing: merge these directories' result.json (space-separated) into one report")
	flag.Parse()
	if *merge != "" {
		os.Exit(mergeParts(strings.Fields(*merge), *out))
	}
	os.Exit(run(*versions, *providers, *suites, *stress, *jobs, *out))
}

func mergeParts(parts []string, out string) int {
	if err := os.MkdirAll(out, 0o750); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-matrix:", err)
		return 2
	}
	res, err := matrix.Merge(out, parts)
	if err == nil {
		err = matrix.Write(out, res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-matrix:", err)
		return 2
	}
	return verdict(res, out)
}

// verdict prints the headline and says whether every cell passed.
func verdict(res matrix.Result, out string) int {
	fmt.Printf("e2e-matrix: %s → %s\n", res.Headline(), filepath.Join(out, matrix.ReportFile))
	if res.Count(matrix.Passed) != len(res.Cells) {
		return 1
	}
	return 0
}

func run(versions, providers, suites, stress string, jobs int, out string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "e2e-matrix:", err)
		return 2
	}
	root, err := workspace.Root()
	if err != nil {
		return fail(err)
	}
	supported, err := matrix.SupportedIn(root)
	if err != nil {
		return fail(err)
	}
	plan, err := matrix.ParsePlan(versions, providers, suites, supported)
	if err != nil {
		return fail(err)
	}
	if plan.Stress, err = suite.ParseStress(stress); err != nil {
		return fail(fmt.Errorf("-stress (make STRESS=N): %w", err))
	}
	if err := checkJobs(plan, jobs); err != nil {
		return fail(err)
	}
	if out, err = filepath.Abs(out); err != nil {
		return fail(err)
	}
	if err := os.RemoveAll(out); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(out, 0o750); err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	contention := ""
	if plan.Stress > 0 {
		contention = ", " + report.StressLine(plan.Stress) + " beside every cell"
	}
	fmt.Printf("e2e-matrix: %d cells (versions %v × providers %v × suites %v)%s, %d at once → %s\n",
		len(plan.Cells()), plan.Versions, plan.Providers, plan.Suites, contention, jobs, out)
	res := matrix.Run(ctx, plan, matrix.Commands{Root: root}, out, os.Stdout, jobs)
	if err := matrix.Write(out, res); err != nil {
		return fail(err)
	}
	return verdict(res, out)
}

// checkJobs refuses a number of cells at once that is no number, or that this machine cannot
// hold: jobs cells of the plan's most demanding provider, each limit named with what to lower.
func checkJobs(plan matrix.Plan, jobs int) error {
	if jobs < 1 {
		return fmt.Errorf("-jobs (make MATRIX_JOBS=N) is %d: give a number of cells, at least 1", jobs)
	}
	if jobs == 1 {
		return nil
	}
	machine, err := suiterun.ReadMachine()
	if err != nil {
		return fmt.Errorf("reading this machine's capacity for MATRIX_JOBS=%d: %w", jobs, err)
	}
	var errs []error
	for _, name := range plan.Providers {
		p, err := cluster.Lookup(name)
		if err != nil {
			return err
		}
		if p.Footprint.SharedCluster {
			errs = append(errs, fmt.Errorf("provider %s runs every suite on its one cluster, so its cells cannot run at once: MATRIX_JOBS=1", name))
			continue
		}
		if err := suiterun.CheckCapacity("MATRIX_JOBS", jobs, name, p.Footprint, machine); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("this machine cannot hold %d cells at once:\n  - %s", jobs, strings.ReplaceAll(err.Error(), "\n", "\n  - "))
	}
	return nil
}
