package mutate

import (
	_ "embed"
	"fmt"

	"sigs.k8s.io/yaml"
)

// EquivalentFile is where the known equivalent mutants are listed, relative to the workspace.
const EquivalentFile = "scenarios/tools/mutate/equivalent.yaml"

//go:embed equivalent.yaml
var equivalentYAML []byte

// Equivalent describes mutants that change nothing a user can see (equivalent.yaml says how an
// entry matches): no scenario can kill them, so a run does not judge them.
type Equivalent struct {
	File     string `json:"file"`
	Operator string `json:"operator"`
	// Source is the mutated line, trimmed (Mutant.Source).
	Source string `json:"source"`
	Change string `json:"change"`
	Why    string `json:"why"`
}

// Matches reports whether m is one of the mutants e describes.
func (e Equivalent) Matches(m Mutant) bool {
	return e.File == m.File && e.Operator == m.Operator && e.Source == m.Source && e.Change == m.Change
}

// Equivalents are the entries of equivalent.yaml.
func Equivalents() ([]Equivalent, error) { return parseEquivalents(equivalentYAML) }

func parseEquivalents(raw []byte) ([]Equivalent, error) {
	var eqs []Equivalent
	if err := yaml.UnmarshalStrict(raw, &eqs); err != nil {
		return nil, fmt.Errorf("%s: %w", EquivalentFile, err)
	}
	for i, e := range eqs {
		if e.File == "" || e.Operator == "" || e.Source == "" || e.Change == "" || e.Why == "" {
			return nil, fmt.Errorf("%s: entry %d (%s %s) needs file, operator, source, change and why", EquivalentFile, i+1, e.File, e.Change)
		}
	}
	return eqs, nil
}

// withoutEquivalents splits candidates into those to judge and those an entry of eqs matches.
func withoutEquivalents(candidates []Mutant, eqs []Equivalent) (judge, equivalent []Mutant) {
	for _, m := range candidates {
		if EquivalentTo(m, eqs) != nil {
			equivalent = append(equivalent, m)
		} else {
			judge = append(judge, m)
		}
	}
	return judge, equivalent
}

// EquivalentTo is the entry of eqs that m matches, or nil.
func EquivalentTo(m Mutant, eqs []Equivalent) *Equivalent {
	for i := range eqs {
		if eqs[i].Matches(m) {
			return &eqs[i]
		}
	}
	return nil
}
