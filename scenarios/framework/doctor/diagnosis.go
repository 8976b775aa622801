package doctor

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
)

// DiagnosisNote is the summary detail under which a scenario notes the diagnoses it made, a
// []Diagnosis (a later note replaces an earlier one: note them all at once).
const DiagnosisNote = "doctorDiagnosis"

// Diagnosis is one doctor run against a fault a scenario injected: the root cause the doctor had
// to name and the root causes it named, each as its summary line does ("ca-bundle (T3)").
type Diagnosis struct {
	Doctor   string   `json:"doctor"`
	Expected string   `json:"expected"` // the check ID, e.g. "ca-bundle"
	Named    []string `json:"named"`
}

// Diagnose is r as the diagnosis of a fault whose root cause is check id expected.
func (p *Program) Diagnose(r Report, expected string) Diagnosis {
	return Diagnosis{Doctor: p.Name(), Expected: expected, Named: r.RootNames()}
}

// Found says whether the doctor named the expected root cause.
func (d Diagnosis) Found() bool {
	return slices.ContainsFunc(d.Named, func(name string) bool { return checkOf(name) == d.Expected })
}

// checkOf is the check ID of a root cause's name: "ca-bundle" of "ca-bundle (T3)".
func checkOf(name string) string {
	id, _, _ := strings.Cut(name, " (")
	return id
}

// Score is how well the doctors diagnosed the faults of a run: recall, the faults whose root
// cause they named; precision, the root causes they named that were the injected fault's.
type Score struct {
	Faults int // diagnoses
	Found  int // of them, naming the expected root cause (the one correct root cause each can name)
	Named  int // root causes named, over every diagnosis
	Missed []string
}

// ScoreOf scores the diagnoses noted in summaries.
func ScoreOf(summaries []report.Summary) Score {
	var s Score
	for _, sum := range summaries {
		for _, sc := range sum.Scenarios {
			for _, d := range diagnosesOf(sc) {
				s.Faults++
				s.Named += len(d.Named)
				if d.Found() {
					s.Found++
					continue
				}
				s.Missed = append(s.Missed, fmt.Sprintf("%s %s (%s): %s expected, named [%s]",
					sum.Suite, sc.ID, d.Doctor, d.Expected, strings.Join(d.Named, ", ")))
			}
		}
	}
	return s
}

// diagnosesOf reads the diagnoses a scenario noted (a summary read back holds them as JSON
// values); a detail of another shape is none.
func diagnosesOf(sc report.Scenario) []Diagnosis {
	v, ok := sc.Details[DiagnosisNote]
	if !ok {
		return nil
	}
	var ds []Diagnosis
	data, err := json.Marshal(v)
	if err != nil || json.Unmarshal(data, &ds) != nil {
		return nil
	}
	return ds
}

// String is the score as reports state it; "" when no doctor ran against a fault.
func (s Score) String() string {
	if s.Faults == 0 {
		return ""
	}
	out := fmt.Sprintf("Doctor: named the injected fault's root cause in %d of %d diagnoses (recall %s); %d of the %d root causes it named were the injected fault's (precision %s)",
		s.Found, s.Faults, percent(s.Found, s.Faults), s.Found, s.Named, percent(s.Found, s.Named))
	if len(s.Missed) > 0 {
		out += "; missed: " + strings.Join(s.Missed, "; ")
	}
	return out
}

func percent(n, of int) string {
	if of == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(n)/float64(of))
}
