// Command e2e-summary prints one table of every e2e suite's scenarios and
// writes the Markdown version next to the suites' reports. `make e2e` runs it
// after the suites:
//
//	go run ./scenarios/tools/cmd/e2e-summary -dir _output/e2e
//	go run ./scenarios/tools/cmd/e2e-summary -dir _output/e2e-local -dir _output/e2e-kind -markdown both.md
//
// It reads <dir>/*/summary.json of every -dir (several: the same suites on several providers,
// one column per suite and provider), prints the plain-text table, writes <first dir>/summary.md,
// and exits 1 when any scenario failed or no suite wrote a summary (a suite that crashed before
// reporting must not look green), 2 on usage or I/O errors. The doctors' precision and recall
// over the faults the scenarios diagnosed follow the table; with -coverage (make e2e COVER=1),
// the operator coverage headline too.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/doctor"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report/coverage"
)

func main() {
	var dirs []string
	flag.Func("dir", "directory holding one sub-directory per suite (repeatable; default _output/e2e)", func(d string) error {
		dirs = append(dirs, d)
		return nil
	})
	md := flag.String("markdown", "", "where to write the Markdown table (default <first dir>/summary.md)")
	cover := flag.String("coverage", "", "operator coverage report directory (e2e-coverage -out) whose headline ends the table")
	flag.Parse()
	if len(dirs) == 0 {
		dirs = []string{"_output/e2e"}
	}
	if *md == "" {
		*md = filepath.Join(dirs[0], report.MarkdownFile)
	}
	os.Exit(run(dirs, *md, *cover))
}

func run(dirs []string, mdPath, coverDir string) int {
	var suites []report.Summary
	for _, dir := range dirs {
		s, err := report.ReadSuites(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e-summary:", err)
			return 2
		}
		suites = append(suites, s...)
	}
	dir := strings.Join(dirs, ", ")
	if err := report.RenderText(os.Stdout, suites); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-summary: printing table:", err)
		return 2
	}
	if err := report.WriteMarkdownFile(mdPath, suites); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-summary:", err)
		return 2
	}
	if score := doctor.ScoreOf(suites).String(); score != "" {
		fmt.Printf("\n%s\n", score)
		if err := appendMarkdown(mdPath, "\n"+score+"\n"); err != nil {
			fmt.Fprintln(os.Stderr, "e2e-summary:", err)
			return 2
		}
	}
	if coverDir != "" {
		if err := appendCoverage(mdPath, coverDir); err != nil {
			fmt.Fprintln(os.Stderr, "e2e-summary:", err)
			return 2
		}
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

// appendCoverage prints the operator coverage headline under the table and adds it to the
// Markdown summary.
func appendCoverage(mdPath, coverDir string) error {
	headline, err := coverage.ReadHeadline(coverDir)
	if err != nil {
		return err
	}
	fmt.Printf("\n%s (%s)\n", headline, filepath.Join(coverDir, coverage.SummaryFile))
	return appendMarkdown(mdPath, fmt.Sprintf("\n**%s** — [per package](%s)\n", headline, filepath.Join(coverDir, coverage.SummaryFile)))
}

// appendMarkdown adds text to the end of the Markdown summary.
func appendMarkdown(mdPath, text string) error {
	f, err := os.OpenFile(mdPath, os.O_APPEND|os.O_WRONLY, 0) //nolint:gosec // G304: the summary this command just wrote
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	return f.Close()
}
