package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
)

// The JUnit XML dialect written here is the common denominator that Jenkins,
// GitLab, GitHub test-reporter actions and Buildkite read: a <testsuites> root
// with one <testsuite>, one <testcase> per scenario, <failure> and <skipped>
// children, time attributes in seconds. A broken test (Scenario.Broken: it could not run) is an
// <error>, as JUnit tells a test that errored from one whose assertion failed.

type junitTestSuites struct {
	XMLName  xml.Name         `xml:"testsuites"`
	Name     string           `xml:"name,attr"`
	Tests    int              `xml:"tests,attr"`
	Failures int              `xml:"failures,attr"`
	Errors   int              `xml:"errors,attr"`
	Skipped  int              `xml:"skipped,attr"`
	Time     string           `xml:"time,attr"`
	Suites   []junitTestSuite `xml:"testsuite"`
}

type junitTestSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitTestCase `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitTestCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr,omitempty"`
}

// WriteJUnit writes s as JUnit XML. Test case names are "<ID> <title>" so CI
// UIs show the catalog ID first; the class name is "e2e.<suite>" so the same
// scenario run by several suites stays distinct. A failure's message is the
// scenario's MessageKey detail and its body lists every detail; details of
// passed scenarios (measurements) go to <system-out>.
func WriteJUnit(w io.Writer, s Summary) error {
	if err := s.Validate(); err != nil {
		return err
	}
	s = s.normalized()
	c := s.Counts()
	suite := junitTestSuite{
		Name:     s.Suite,
		Tests:    c.Total(),
		Failures: c.Failed,
		Skipped:  c.Skipped,
		Time:     formatSeconds(s.Seconds),
		Properties: []junitProperty{
			{Name: "provider", Value: s.Provider},
			{Name: "kubernetesVersion", Value: s.KubernetesVersion},
		},
	}
	if s.Stress > 0 {
		suite.Properties = append(suite.Properties, junitProperty{Name: "stress", Value: StressLine(s.Stress)})
	}
	if !s.StartedAt.IsZero() {
		// JUnit's schema wants ISO 8601 without a zone; UTC keeps it unambiguous.
		suite.Timestamp = s.StartedAt.UTC().Format("2006-01-02T15:04:05")
	}
	errors := 0
	for _, sc := range s.Scenarios {
		tc := junitTestCase{
			Name:      testCaseName(sc),
			Classname: "e2e." + s.Suite,
			Time:      formatSeconds(sc.Seconds),
		}
		switch sc.Result {
		case Failed:
			msg := sc.Message()
			if msg == "" {
				msg = "scenario " + sc.ID + " failed"
			}
			if sc.Broken() {
				errors++
				tc.Error = &junitFailure{Message: msg, Type: "BrokenTest", Text: detailLines(sc.Details)}
				break
			}
			tc.Failure = &junitFailure{Message: msg, Type: "ScenarioFailed", Text: detailLines(sc.Details)}
		case Skipped:
			tc.Skipped = &junitSkipped{Message: sc.Message()}
		default:
			tc.SystemOut = detailLines(sc.Details)
		}
		suite.Cases = append(suite.Cases, tc)
	}
	suite.Failures, suite.Errors = c.Failed-errors, errors
	doc := junitTestSuites{
		Name:     "gauntlet e2e " + s.Suite,
		Tests:    suite.Tests,
		Failures: suite.Failures,
		Errors:   suite.Errors,
		Skipped:  suite.Skipped,
		Time:     suite.Time,
		Suites:   []junitTestSuite{suite},
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("writing junit report of suite %s: %w", s.Suite, err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("encoding junit report of suite %s: %w", s.Suite, err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("writing junit report of suite %s: %w", s.Suite, err)
	}
	return nil
}

func testCaseName(sc Scenario) string {
	if sc.Title == "" {
		return sc.ID
	}
	return sc.ID + " " + sc.Title
}

func formatSeconds(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }
