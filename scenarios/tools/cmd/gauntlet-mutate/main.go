// Command gauntlet-mutate is mutation testing of the operator and its chart through the e2e
// suites on the local provider (`make mutate`): see package mutate and docs/mutation.md.
//
//	go run ./scenarios/tools/cmd/gauntlet-mutate -mutants 40 -seed 1 -jobs 2 -out _output/mutate -coverage _output/coverage/e2e
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/mutate"
)

func main() {
	var o mutate.Options
	flag.IntVar(&o.Mutants, "mutants", 40, "how many mutants that compile to judge (MUTANTS)")
	flag.Uint64Var(&o.Seed, "seed", 1, "picks the mutants; the same seed and sources pick the same ones (MUTATE_SEED)")
	flag.StringVar(&o.Out, "out", "_output/mutate", "report directory (report.md, result.json; workspace/<job> are the scratch copies)")
	flag.IntVar(&o.Jobs, "jobs", 1, "how many mutants to judge at once, each in its own scratch copy and clusters (MUTATE_JOBS)")
	flag.StringVar(&o.Coverage, "coverage", "_output/coverage/e2e", "per-suite coverage of the same sources (make e2e COVER=1); suites missing there get a baseline run")
	list := flag.Bool("list", false, "print every candidate mutant (ID, change, and why when it is known equivalent) and exit")
	only := flag.String("only", "", "judge these mutants only, by ID (file:line:operator, as -list and the report give them), comma-separated (MUTANT_IDS)")
	flag.Parse()
	root, err := workspace.Root()
	if err != nil {
		fail(err)
	}
	o.Root, o.Log = root, os.Stdout
	if *list {
		cands, err := mutate.Candidates(root)
		if err != nil {
			fail(err)
		}
		eqs, err := mutate.Equivalents()
		if err != nil {
			fail(err)
		}
		for _, m := range cands {
			fmt.Printf("%s\t%s", m.ID(), m.Change)
			if e := mutate.EquivalentTo(m, eqs); e != nil {
				fmt.Printf("\tknown equivalent, not judged: %s", e.Why)
			}
			fmt.Println()
		}
		return
	}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	if o.Mutants < 1 {
		fail(fmt.Errorf("-mutants %d: judge at least one", o.Mutants))
	}
	if o.Jobs < 1 {
		fail(fmt.Errorf("-jobs %d: run at least one (MUTATE_JOBS=1 judges one mutant at a time)", o.Jobs))
	}
	for _, p := range []*string{&o.Out, &o.Coverage} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(root, *p)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := mutate.Run(ctx, o)
	if r != nil {
		fmt.Println(r.Headline())
		fmt.Println("report:", filepath.Join(o.Out, mutate.ReportFile))
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gauntlet-mutate:", err)
	os.Exit(1)
}
