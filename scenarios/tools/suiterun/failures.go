package suiterun

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// messageWidth bounds the line quoted of a failure's message; the combined table that follows
// has it whole.
const messageWidth = 300

// WriteFailures writes, once every suite has ended, what failed and where to look: each failed
// scenario's message and artifacts, each suite that ended badly without a failed scenario to
// show for it, and each such suite's log. Nothing when everything passed.
func WriteFailures(w io.Writer, suites []SuiteState) {
	var b strings.Builder
	for _, s := range suites {
		if s.Status != Ended || s.OK() {
			continue
		}
		var setupFailed []string
		var setupMessage string
		if s.Summary != nil {
			for _, sc := range s.Summary.Scenarios {
				if sc.Result != report.Failed {
					continue
				}
				if msg, ok := strings.CutPrefix(sc.Message(), suite.SetupFailedPrefix); ok {
					setupFailed, setupMessage = append(setupFailed, sc.ID), msg
					continue
				}
				fmt.Fprintf(&b, "  ✗ %s %s %s\n", s.Name, sc.ID, sc.Title)
				fmt.Fprintf(&b, "      %s\n", report.FirstLine(sc.Message(), messageWidth))
				writeIfExists(&b, "artifacts", suite.ArtifactsDir(s.Dir, sc.ID))
			}
		}
		switch {
		case len(setupFailed) > 0:
			fmt.Fprintf(&b, "  ✗ %s: its setup failed, so its %d scenarios did not run\n", s.Name, len(setupFailed))
			fmt.Fprintf(&b, "      %s\n", report.FirstLine(setupMessage, messageWidth))
			writeIfExists(&b, "artifacts", suite.ArtifactsDir(s.Dir, suite.SetupArtifacts))
		case s.Summary == nil:
			fmt.Fprintf(&b, "  ✗ %s: go test %s without a %s\n", s.Name, exitWords(s.Exit), report.SummaryFile)
			writeExplanation(&b, s)
		case s.Exit != nil && s.Failed == 0:
			fmt.Fprintf(&b, "  ✗ %s: every scenario passed, but go test %s\n", s.Name, exitWords(s.Exit))
			writeExplanation(&b, s)
		}
		fmt.Fprintf(&b, "      log: %s\n", DisplayPath(s.Log))
	}
	if b.Len() > 0 {
		_, _ = fmt.Fprintf(w, "\nFAILED\n%s", b.String()) // the combined table follows with the same failures
	}
}

func writeExplanation(b *strings.Builder, s SuiteState) {
	if e := s.Explanation(); e != "" {
		fmt.Fprintf(b, "      %s\n", report.FirstLine(e, messageWidth))
	}
}

func writeIfExists(b *strings.Builder, label, path string) {
	if _, err := os.Stat(path); err == nil {
		fmt.Fprintf(b, "      %s: %s\n", label, DisplayPath(path))
	}
}

// DisplayPath is path relative to the working directory when it is inside it: what a person
// types or clicks.
func DisplayPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return path
	}
	return rel
}
