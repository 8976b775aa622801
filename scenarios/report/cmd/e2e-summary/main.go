// Command e2e-summary prints one table of every e2e suite's scenarios and
// writes the Markdown version next to the suites' reports. `make e2e` runs it
// after the suites:
//
//	go run ./scenarios/report/cmd/e2e-summary -dir _output/e2e
//
// It reads <dir>/*/summary.json, prints the plain-text table, writes
// <dir>/summary.md, and exits 1 when any scenario failed or no suite wrote a
// summary (a suite that crashed before reporting must not look green), 2 on
// usage or I/O errors.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gauntlet-dev/gauntlet/scenarios/report"
)

func main() {
	dir := flag.String("dir", "_output/e2e", "directory holding one sub-directory per suite")
	md := flag.String("markdown", "", "where to write the Markdown table (default <dir>/summary.md)")
	flag.Parse()
	if *md == "" {
		*md = filepath.Join(*dir, report.MarkdownFile)
	}
	os.Exit(run(*dir, *md))
}

func run(dir, mdPath string) int {
	suites, err := report.ReadSuites(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-summary:", err)
		return 2
	}
	if err := report.RenderText(os.Stdout, suites); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-summary: printing table:", err)
		return 2
	}
	if err := report.WriteMarkdownFile(mdPath, suites); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-summary:", err)
		return 2
	}
	fmt.Printf("\nwrote %s\n", mdPath)
	if len(suites) == 0 {
		fmt.Fprintf(os.Stderr, "e2e-summary: no suite wrote %s under %s\n", report.SummaryFile, dir)
		return 1
	}
	for _, s := range suites {
		if s.Counts().Failed > 0 {
			return 1
		}
	}
	return 0
}
