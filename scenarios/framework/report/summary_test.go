package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleSummary() Summary {
	return Summary{
		Suite:             "autocert",
		Provider:          "local",
		KubernetesVersion: "v1.37.0",
		StartedAt:         time.Date(2025, 11, 21, 8, 30, 0, 0, time.UTC),
		Seconds:           183.25,
		Scenarios: []Scenario{
			{ID: "A10", Title: "Defaulting fills the image", Result: Passed, Seconds: 1.5},
			{ID: "A2", Title: "Invalid DGD is denied", Result: Failed, Seconds: 3.25, Details: map[string]any{
				MessageKey: "expected denial mentioning spec.services, got: admitted",
				"attempts": float64(3),
			}},
			{ID: "A1", Title: "Valid DGD is admitted", Result: Passed, Seconds: 0.75, Details: map[string]any{
				"failoverSeconds": map[string]any{"min": 1.5, "median": 2.0, "max": 4.25},
			}},
			{ID: "C3", Title: "Rotation under load", Result: Skipped, Seconds: 0, Details: map[string]any{
				MessageKey: "needs cert-manager",
			}},
		},
	}
}

func TestSummaryJSONRoundTrip(t *testing.T) {
	dir := t.TempDir()
	in := sampleSummary()
	require.NoError(t, WriteFiles(dir, in))

	out, err := ReadSummary(filepath.Join(dir, SummaryFile))
	require.NoError(t, err)

	want := in.normalized()
	assert.Equal(t, want, out)
	assert.Equal(t, []string{"A1", "A2", "A10", "C3"}, scenarioIDs(out), "scenarios are written in natural ID order")
	assert.Equal(t, map[string]any{}, out.Scenarios[2].Details, "a scenario without details gets an empty object")
}

func TestSummaryJSONUsesContractKeys(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, sampleSummary()))

	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b.Bytes(), &raw))
	assert.ElementsMatch(t, []string{"suite", "provider", "kubernetesVersion", "startedAt", "seconds", "scenarios"}, keysOf(raw))
	assert.JSONEq(t, `"2025-11-21T08:30:00Z"`, string(raw["startedAt"]))

	var scenarios []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw["scenarios"], &scenarios))
	for _, sc := range scenarios {
		assert.ElementsMatch(t, []string{"id", "title", "result", "seconds", "details"}, keysOf(sc))
		assert.NotEqual(t, "null", string(sc["details"]), "details must be an object, never null")
	}
}

func TestWriteJSONRejectsUnknownResult(t *testing.T) {
	s := sampleSummary()
	s.Scenarios[0].Result = "flaky"
	err := WriteJSON(&bytes.Buffer{}, s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `scenario A10 has result "flaky"`)
}

func TestDecodeJSONRejectsDuplicateIDs(t *testing.T) {
	_, err := DecodeJSON(strings.NewReader(`{"suite":"x","scenarios":[{"id":"A1","result":"passed"},{"id":"A1","result":"failed"}]}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "scenario A1 appears twice")
}

func TestReadSuitesSkipsDirectoriesWithoutSummary(t *testing.T) {
	root := t.TempDir()
	b := sampleSummary()
	b.Suite = "certmanager"
	a := sampleSummary()
	require.NoError(t, WriteFiles(filepath.Join(root, "certmanager"), b))
	require.NoError(t, WriteFiles(filepath.Join(root, "autocert"), a))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "externalcert", "artifacts"), 0o750))

	suites, err := ReadSuites(root)
	require.NoError(t, err)
	require.Len(t, suites, 2)
	assert.Equal(t, "autocert", suites[0].Suite)
	assert.Equal(t, "certmanager", suites[1].Suite)
}

func TestReadSuitesNamesBrokenFile(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "autocert"), 0o750))
	path := filepath.Join(root, "autocert", SummaryFile)
	require.NoError(t, os.WriteFile(path, []byte(`{"suite":`), 0o600))

	_, err := ReadSuites(root)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
}

// junit* mirror the JUnit XML schema independently of the writer's types, so
// the test fails if the writer drifts from what CI systems parse.
type junitDoc struct {
	XMLName xml.Name `xml:"testsuites"`
	Tests   int      `xml:"tests,attr"`
	Suites  []struct {
		Name       string `xml:"name,attr"`
		Tests      int    `xml:"tests,attr"`
		Failures   int    `xml:"failures,attr"`
		Errors     int    `xml:"errors,attr"`
		Skipped    int    `xml:"skipped,attr"`
		Time       string `xml:"time,attr"`
		Timestamp  string `xml:"timestamp,attr"`
		Properties []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			SystemOut string `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestJUnitStructure(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteFiles(dir, sampleSummary()))
	data, err := os.ReadFile(filepath.Join(dir, JUnitFile)) //nolint:gosec // G304: the file WriteFiles wrote under t.TempDir()
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(data, []byte("<?xml")), "junit.xml starts with an XML declaration")

	var doc junitDoc
	require.NoError(t, xml.Unmarshal(data, &doc))
	assert.Equal(t, 4, doc.Tests)
	require.Len(t, doc.Suites, 1)
	s := doc.Suites[0]
	assert.Equal(t, "autocert", s.Name)
	assert.Equal(t, []int{4, 1, 0, 1}, []int{s.Tests, s.Failures, s.Errors, s.Skipped})
	assert.Equal(t, "183.250", s.Time)
	assert.Equal(t, "2025-11-21T08:30:00", s.Timestamp)
	require.Len(t, s.Properties, 2)
	assert.Equal(t, "provider", s.Properties[0].Name)
	assert.Equal(t, "local", s.Properties[0].Value)

	require.Len(t, s.Cases, 4)
	var names []string
	for _, c := range s.Cases {
		names = append(names, c.Name)
		assert.Equal(t, "e2e.autocert", c.Classname)
	}
	assert.Equal(t, []string{"A1 Valid DGD is admitted", "A2 Invalid DGD is denied", "A10 Defaulting fills the image", "C3 Rotation under load"}, names)

	a1, a2, c3 := s.Cases[0], s.Cases[1], s.Cases[3]
	assert.Nil(t, a1.Failure)
	assert.Contains(t, a1.SystemOut, `failoverSeconds: {"max":4.25,"median":2,"min":1.5}`)

	require.NotNil(t, a2.Failure)
	assert.Equal(t, "expected denial mentioning spec.services, got: admitted", a2.Failure.Message)
	assert.Contains(t, a2.Failure.Body, "attempts: 3")
	assert.Equal(t, "3.250", a2.Time)

	require.NotNil(t, c3.Skipped)
	assert.Equal(t, "needs cert-manager", c3.Skipped.Message)
}

func TestJUnitEscapesMarkupInMessages(t *testing.T) {
	s := Summary{Suite: "x", Scenarios: []Scenario{{ID: "A1", Result: Failed, Details: map[string]any{
		MessageKey: `denied: <spec> & "quotes"`,
	}}}}
	var b bytes.Buffer
	require.NoError(t, WriteJUnit(&b, s))
	var doc junitDoc
	require.NoError(t, xml.Unmarshal(b.Bytes(), &doc))
	assert.Equal(t, `denied: <spec> & "quotes"`, doc.Suites[0].Cases[0].Failure.Message)
}

func TestCompareIDsNaturalOrder(t *testing.T) {
	want := []string{"A1", "A2", "A3", "A9", "A10", "A11", "C1", "C2", "C10", "M1", "P6", "T1", "T1a", "T1b", "T2"}
	got := slices.Clone(want)
	r := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // G404: a fixed seed, for a reproducible shuffle
	r.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
	slices.SortFunc(got, CompareIDs)
	assert.Equal(t, want, got)

	for _, tc := range []struct {
		a, b string
		sign int
	}{
		{"A2", "A10", -1},
		{"A10", "A2", 1},
		{"A10", "A10", 0},
		{"A", "A1", -1},
		{"A01", "A1", -1}, // equal numbers fall back to text so the order is total
		{"A99999999999999999999", "A100000000000000000000", -1},
		{"1", "A", -1},
	} {
		got := CompareIDs(tc.a, tc.b)
		assert.Equalf(t, tc.sign, sign(got), "CompareIDs(%q, %q) = %d", tc.a, tc.b, got)
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func scenarioIDs(s Summary) []string {
	var ids []string
	for _, sc := range s.Scenarios {
		ids = append(ids, sc.ID)
	}
	return ids
}

func keysOf[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestJUnitReportsABrokenTestAsAnErrorNotAFailure(t *testing.T) {
	s := Summary{Suite: "conformance", Scenarios: []Scenario{
		{ID: "gatekeeper/require-owner", Result: Failed, Details: map[string]any{MessageKey: "expected Chainsaw test require-owner to pass; …"}},
		{ID: "gatekeeper/typo", Result: Failed, Details: map[string]any{MessageKey: "broken test: chainsaw-test.yaml:8: …", BrokenKey: true}},
	}}
	var b bytes.Buffer
	require.NoError(t, WriteJUnit(&b, s))
	var doc struct {
		Suites []struct {
			Failures int `xml:"failures,attr"`
			Errors   int `xml:"errors,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Type string `xml:"type,attr"`
				} `xml:"failure"`
				Error *struct {
					Message string `xml:"message,attr"`
					Type    string `xml:"type,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(b.Bytes(), &doc))
	require.Len(t, doc.Suites, 1)
	got := doc.Suites[0]
	assert.Equal(t, []int{1, 1}, []int{got.Failures, got.Errors})
	require.Len(t, got.Cases, 2)
	assert.NotNil(t, got.Cases[0].Failure)
	assert.Nil(t, got.Cases[0].Error)
	require.NotNil(t, got.Cases[1].Error)
	assert.Nil(t, got.Cases[1].Failure)
	assert.Equal(t, "BrokenTest", got.Cases[1].Error.Type)
	assert.Equal(t, "broken test: chainsaw-test.yaml:8: …", got.Cases[1].Error.Message)
	assert.True(t, s.Scenarios[1].Broken())
	assert.False(t, s.Scenarios[0].Broken())
}
