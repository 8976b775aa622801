package mutate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Files a mutation run writes into its output directory.
const (
	ReportFile = "report.md"
	ResultFile = "result.json"
)

// Report is a mutation run's outcome.
type Report struct {
	Seed       uint64 `json:"seed"`
	Candidates int    `json:"candidates"`
	// Equivalent counts the candidates equivalent.yaml names, which were not judged.
	Equivalent int `json:"equivalent"`
	NotViable  int `json:"notViable"`
	// Jobs is how many mutants were judged at once.
	Jobs     int       `json:"jobs"`
	Outcomes []Outcome `json:"outcomes"`
	Seconds  float64   `json:"seconds"`
}

// Killed counts the mutants a scenario killed.
func (r *Report) Killed() int {
	n := 0
	for _, o := range r.Outcomes {
		if o.Killed {
			n++
		}
	}
	return n
}

// Score is the mutation score in percent: killed of judged.
func (r *Report) Score() float64 {
	if len(r.Outcomes) == 0 {
		return 0
	}
	return 100 * float64(r.Killed()) / float64(len(r.Outcomes))
}

// Headline is the report's one-line verdict.
func (r *Report) Headline() string {
	return fmt.Sprintf("mutation score %.0f %%: %d of %d mutants killed, %d survived (seed %d; %d more did not compile; %d candidates, %d more known equivalent and not judged; %.0f s with %d job(s))",
		r.Score(), r.Killed(), len(r.Outcomes), len(r.Outcomes)-r.Killed(), r.Seed, r.NotViable, r.Candidates, r.Equivalent, r.Seconds, max(1, r.Jobs))
}

// Markdown renders the report: the headline, the survivors (the work), then every mutant.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Mutation testing\n\n**%s**\n\n", r.Headline())
	fmt.Fprintf(&b, "A survivor is a change to the operator or chart that every suite reaching it let pass: kill it with a new or sharper scenario, or, when no user could see the change, list it in `%s` with the reason.\n\n", EquivalentFile)
	b.WriteString("## Survivors\n\n| mutant | change | suites run |\n|---|---|---|\n")
	for _, o := range r.Outcomes {
		if !o.Killed {
			suites := strings.Join(o.Suites, ", ")
			if suites == "" {
				suites = "none reaches this line"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", o.Mutant.ID(), cell(o.Mutant.Change), suites)
		}
	}
	b.WriteString("\n## Every mutant\n\n| # | mutant | change | verdict | time |\n|---:|---|---|---|---:|\n")
	for i, o := range r.Outcomes {
		verdict := "**survived**"
		if o.Killed {
			verdict = fmt.Sprintf("killed by %s (%s): %s", o.By, o.Suite, cell(o.Message))
		}
		if len(o.NotRepeated) > 0 {
			verdict += fmt.Sprintf("; failed once, passed when run again alone (not a kill): %s", cell(strings.Join(o.NotRepeated, "; ")))
		}
		fmt.Fprintf(&b, "| %d | `%s` | %s | %s | %.0f s |\n", i+1, o.Mutant.ID(), cell(o.Mutant.Change), verdict, o.Seconds)
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Write writes report.md and result.json into dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ResultFile), raw, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ReportFile), []byte(r.Markdown()), 0o600)
}
