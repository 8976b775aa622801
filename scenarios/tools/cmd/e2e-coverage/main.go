// Command e2e-coverage reports what the e2e suites covered of the operator. `make e2e COVER=1`
// runs the suites with a coverage-instrumented operator (its counters land in -e2e), the
// operator's unit and envtest tests with -test.gocoverdir (-unit), then:
//
//	go run ./scenarios/tools/cmd/e2e-coverage -e2e _output/coverage/e2e -unit _output/coverage/unit -out _output/coverage
//
// It writes <out>/summary.md (per package: e2e, unit + envtest, merged; the webhook,
// certificate and lease functions e2e never enters), e2e.html and merged.html (go tool cover),
// the text profiles and coverage.json, and prints the headline. Exit status 1 on any error.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report/coverage"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

func main() {
	e2e := flag.String("e2e", "_output/coverage/e2e", "GOCOVERDIR the suites' operator processes wrote (--cover-dir)")
	unit := flag.String("unit", "", "GOCOVERDIR of the operator's unit and envtest tests (optional)")
	out := flag.String("out", "_output/coverage", "where to write the report")
	flag.Parse()
	root, err := workspace.Root()
	if err != nil {
		fail(err)
	}
	r, err := coverage.Build(context.Background(), root, *e2e, *unit, *out)
	if err != nil {
		fail(err)
	}
	fmt.Println(r.Headline())
	fmt.Printf("%d webhook, certificate and lease functions never entered by e2e; report: %s\n",
		len(r.NeverEntered), filepath.Join(*out, coverage.SummaryFile))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "e2e-coverage:", err)
	os.Exit(1)
}
