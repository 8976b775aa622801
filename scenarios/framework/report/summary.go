// Package report is the e2e suites' report contract: every suite writes
// _output/e2e/<suite>/summary.json and junit.xml, and `make e2e` reads every
// suite's summary.json back to print one combined table and write
// _output/e2e/summary.md.
//
// The package is deliberately free of e2e-framework and Kubernetes imports so
// that any tool (CI jobs, dashboards, the bench module) can read the files
// without pulling in a test framework. Suites feed a Recorder from their
// feature hooks.
package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// File names inside a suite's output directory. Other tools look for these
// exact names, so they are part of the contract.
const (
	SummaryFile = "summary.json"
	JUnitFile   = "junit.xml"
	// MarkdownFile is the combined table `make e2e` writes next to the
	// per-suite directories.
	MarkdownFile = "summary.md"
)

// Outcome is a scenario's result as written to summary.json.
type Outcome string

// The only three outcomes a scenario can have; readers may rely on this set.
const (
	Passed  Outcome = "passed"
	Failed  Outcome = "failed"
	Skipped Outcome = "skipped"
)

// Valid reports whether o is one of the contract's outcomes.
func (o Outcome) Valid() bool {
	return o == Passed || o == Failed || o == Skipped
}

// MessageKey is the Details key holding a one-line explanation of a failure or
// skip (what was expected and what was seen). junit.xml uses it as the
// failure message; the tables print it first. Keeping it inside Details keeps
// summary.json's top-level keys exactly those of the contract.
const MessageKey = "message"

// Summary is the content of one suite's summary.json.
type Summary struct {
	// Suite is the suite's name, e.g. "autocert"; it is also its directory
	// under _output/e2e.
	Suite string `json:"suite"`
	// Provider is the cluster provider the suite ran against ("local", "kind").
	Provider string `json:"provider"`
	// KubernetesVersion is the API server's version, e.g. "v1.37.0".
	KubernetesVersion string `json:"kubernetesVersion"`
	// StartedAt is when the suite started (RFC 3339 in JSON).
	StartedAt time.Time `json:"startedAt"`
	// Seconds is the suite's wall time, including cluster setup.
	Seconds float64 `json:"seconds"`
	// Stress is how many CPU-bound worker processes ran beside the suite (--stress), from
	// before its cluster's creation to its last check; absent when none did.
	Stress int `json:"stress,omitempty"`
	// Scenarios are ordered by ID in natural order (A2 before A10).
	Scenarios []Scenario `json:"scenarios"`
}

// Scenario is one catalog row's outcome within a suite.
type Scenario struct {
	// ID is the catalog ID (CATALOG.md), e.g. "A1" or "C8".
	ID string `json:"id"`
	// Title is the catalog row's short description.
	Title string `json:"title"`
	// Result is passed, failed or skipped.
	Result Outcome `json:"result"`
	// Seconds is the scenario's wall time.
	Seconds float64 `json:"seconds"`
	// Details is free-form: measurements (failover min/median/max, request
	// counts) and, under MessageKey, why the scenario failed or was skipped.
	// Always an object in JSON, never null, so readers need no nil check.
	Details map[string]any `json:"details"`
}

// BrokenKey is the Details key set to true on a failed scenario whose test could not run at
// all: a test of another runner (a target's Chainsaw test) that does not load. It is not a
// failed check: junit.xml reports it as an error, the tables and the conformance grid as broken.
const BrokenKey = "broken"

// Broken reports whether the scenario failed because its test could not run (BrokenKey).
func (s Scenario) Broken() bool {
	b, _ := s.Details[BrokenKey].(bool)
	return s.Result == Failed && b
}

// Message returns the scenario's MessageKey detail, or "" when it has none or
// it is not a string.
func (s Scenario) Message() string {
	m, _ := s.Details[MessageKey].(string)
	return m
}

// Counts tallies outcomes.
type Counts struct {
	Passed, Failed, Skipped int
}

// Total is the number of scenarios counted.
func (c Counts) Total() int { return c.Passed + c.Failed + c.Skipped }

func (c *Counts) add(o Outcome) {
	switch o {
	case Passed:
		c.Passed++
	case Failed:
		c.Failed++
	case Skipped:
		c.Skipped++
	}
}

// Counts tallies the suite's scenarios by outcome.
func (s Summary) Counts() Counts {
	var c Counts
	for _, sc := range s.Scenarios {
		c.add(sc.Result)
	}
	return c
}

// Validate checks what readers of the contract rely on: a suite name, known
// outcomes, non-empty and unique IDs.
func (s Summary) Validate() error {
	if s.Suite == "" {
		return errors.New("summary has no suite name")
	}
	seen := make(map[string]bool, len(s.Scenarios))
	for i, sc := range s.Scenarios {
		if sc.ID == "" {
			return fmt.Errorf("suite %s: scenario #%d has no id", s.Suite, i+1)
		}
		if seen[sc.ID] {
			return fmt.Errorf("suite %s: scenario %s appears twice", s.Suite, sc.ID)
		}
		seen[sc.ID] = true
		if !sc.Result.Valid() {
			return fmt.Errorf("suite %s: scenario %s has result %q, want passed, failed or skipped", s.Suite, sc.ID, sc.Result)
		}
	}
	return nil
}

// normalized returns a copy ready to be written: scenarios in natural ID
// order, nil Details replaced by empty objects, durations rounded to
// milliseconds (finer digits are noise and make diffs unreadable).
func (s Summary) normalized() Summary {
	out := s
	out.Seconds = roundSeconds(s.Seconds)
	out.Scenarios = make([]Scenario, len(s.Scenarios))
	for i, sc := range s.Scenarios {
		if sc.Details == nil {
			sc.Details = map[string]any{}
		}
		sc.Seconds = roundSeconds(sc.Seconds)
		out.Scenarios[i] = sc
	}
	slices.SortStableFunc(out.Scenarios, func(a, b Scenario) int { return CompareIDs(a.ID, b.ID) })
	if out.Scenarios == nil {
		out.Scenarios = []Scenario{}
	}
	return out
}

func roundSeconds(s float64) float64 { return math.Round(s*1000) / 1000 }

// WriteJSON writes s as summary.json content (indented, scenarios in natural
// ID order).
func WriteJSON(w io.Writer, s Summary) error {
	if err := s.Validate(); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s.normalized()); err != nil {
		return fmt.Errorf("encoding summary of suite %s: %w", s.Suite, err)
	}
	return nil
}

// DecodeJSON reads summary.json content and validates it.
func DecodeJSON(r io.Reader) (Summary, error) {
	var s Summary
	dec := json.NewDecoder(r)
	if err := dec.Decode(&s); err != nil {
		return Summary{}, fmt.Errorf("decoding summary: %w", err)
	}
	if err := s.Validate(); err != nil {
		return Summary{}, err
	}
	for i := range s.Scenarios {
		if s.Scenarios[i].Details == nil {
			s.Scenarios[i].Details = map[string]any{}
		}
	}
	return s, nil
}

// WriteFiles writes dir/summary.json and dir/junit.xml, creating dir. Each file
// is written to a temporary name and renamed, so a reader never sees half a
// report even if the suite is killed while writing.
func WriteFiles(dir string, s Summary) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("creating report directory %s: %w", dir, err)
	}
	var js, xs bytes.Buffer
	if err := WriteJSON(&js, s); err != nil {
		return err
	}
	if err := WriteJUnit(&xs, s); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, SummaryFile), js.Bytes()); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, JUnitFile), xs.Bytes())
}

// ReadSummary reads and validates one summary.json file.
func ReadSummary(path string) (Summary, error) {
	f, err := os.Open(path) //nolint:gosec // G304: reading the summary file the caller names is the point
	if err != nil {
		return Summary{}, fmt.Errorf("reading suite summary: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	s, err := DecodeJSON(f)
	if err != nil {
		return Summary{}, fmt.Errorf("reading suite summary %s: %w", path, err)
	}
	return s, nil
}

// ReadSuites reads root/*/summary.json (the layout suites write under
// _output/e2e), ordered by suite name. Directories without a summary are
// ignored because a suite that crashed before writing one leaves only
// artifacts behind; the caller decides whether an empty result is an error.
func ReadSuites(root string) ([]Summary, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("listing suite reports in %s: %w", root, err)
	}
	var out []Summary
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		path := filepath.Join(root, e.Name(), SummaryFile)
		s, err := ReadSummary(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Summary) int { return CompareIDs(a.Suite, b.Suite) })
	return out, nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// Removing the temporary file fails harmlessly after a successful rename, and otherwise the
	// write's own error is the one to report. os.CreateTemp made it 0600, and so is the report.
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
