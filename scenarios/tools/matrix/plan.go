// Package matrix runs the e2e suites over Kubernetes versions × providers × suites, one cell
// after another (the matrix must fit a 2-core machine), and writes one report: a grid of
// scenario × cell. `make e2e-matrix` runs it (scenarios/tools/cmd/gauntlet-matrix).
package matrix

import (
	"fmt"
	"slices"
	"strings"
)

// Cell is one run of one suite on one provider and Kubernetes version.
type Cell struct {
	Version  string `json:"version"`
	Provider string `json:"provider"`
	Suite    string `json:"suite"`
	// Stress is how many CPU-bound workers ran beside the suite (its --stress). It is part of
	// the cell, so a merged grid keeps a contended run of a suite apart from a calm one.
	Stress int `json:"stress,omitempty"`
}

func (c Cell) String() string { return c.Version + " " + c.Provider + " " + c.Suite + c.stressMark() }

// column is the grid column the cell belongs to: its version, provider and stress.
func (c Cell) column() string { return c.Version + " " + c.Provider + c.stressMark() }

func (c Cell) stressMark() string {
	if c.Stress == 0 {
		return ""
	}
	return fmt.Sprintf(" (stress %d)", c.Stress)
}

// Plan is what a matrix run covers.
type Plan struct {
	Versions, Providers, Suites []string
	// Stress is every cell's --stress: CPU-bound workers beside each suite (0: none).
	Stress int
}

// Supported is what a plan may name: the Kubernetes versions the control-plane tools build,
// the providers, and the suites under e2e/.
type Supported struct {
	Versions, Providers, Suites []string
	// AddVersion says how to support another version (for the error naming an unknown one).
	AddVersion string
}

// ParsePlan reads space- or comma-separated lists of versions, providers and suites; an empty
// list means all that are supported. An unknown name is an error that lists what is supported.
func ParsePlan(versions, providers, suites string, s Supported) (Plan, error) {
	var p Plan
	var err error
	if p.Versions, err = pick("Kubernetes version", "VERSIONS", versions, s.Versions, s.AddVersion); err != nil {
		return Plan{}, err
	}
	if p.Providers, err = pick("provider", "PROVIDERS", providers, s.Providers, ""); err != nil {
		return Plan{}, err
	}
	if p.Suites, err = pick("suite", "SUITES", suites, s.Suites, "suites are the directories under e2e/ with a main_test.go"); err != nil {
		return Plan{}, err
	}
	return p, nil
}

func pick(what, variable, list string, supported []string, howToAdd string) ([]string, error) {
	names := strings.FieldsFunc(list, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
	if len(names) == 0 {
		return slices.Clone(supported), nil
	}
	var out []string
	for _, n := range names {
		if !slices.Contains(supported, n) {
			msg := fmt.Sprintf("%s=%q: unknown %s %q; supported: %s", variable, list, what, n, strings.Join(supported, ", "))
			if howToAdd != "" {
				msg += " (" + howToAdd + ")"
			}
			return nil, fmt.Errorf("%s", msg)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Cells are the plan's cells: by version, then provider, then suite.
func (p Plan) Cells() []Cell {
	var out []Cell
	for _, v := range p.Versions {
		for _, pr := range p.Providers {
			for _, s := range p.Suites {
				out = append(out, Cell{Version: v, Provider: pr, Suite: s, Stress: p.Stress})
			}
		}
	}
	return out
}
