package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/doctor"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
	"github.com/gauntlet-dev/gauntlet/scenarios/tools/suiterun"
)

// Suite is the e2e suite (e2e/<Suite>) that runs the W checks against a target.
const Suite = "conformance"

// TargetRun is one target's runs of the contract's suite, one per certificate mode it declares,
// each its own cluster, reporting under Out: <Out>/<mode>/ (log, summary.json, artifacts), then
// the grid in <Out>/report.md and <Out>/summary.json. `make e2e-conformance` makes them, and so
// does `make test`, whose runs of Gatekeeper's modes go beside its suites.
type TargetRun struct {
	// Path is the description the suite loads (--target).
	Path   string
	Target *target.Target
	Out    string
}

// Prepare builds the target's images (their progress to progress) and empties Out for this run,
// before any mode starts.
func (r TargetRun) Prepare(ctx context.Context, progress io.Writer) error {
	if _, err := r.Target.Images(ctx, progress); err != nil {
		return err
	}
	if err := os.RemoveAll(r.Out); err != nil {
		return err
	}
	return os.MkdirAll(r.Out, 0o750)
}

// Dir is where mode's run reports.
func (r TargetRun) Dir(mode string) string { return filepath.Join(r.Out, mode) }

// Args are the suite's arguments for mode's run. They go after the arguments every suite gets
// (go test … -args): a flag given twice takes its last value, so these place the report under
// Out whatever --e2e-output those said. The cluster's name carries this process's ID, so that
// two runs on one machine do not meet.
func (r TargetRun) Args(mode string) []string {
	cluster := "w-" + r.Target.Name + "-" + strings.ToLower(mode) + "-" + strconv.Itoa(os.Getpid()%100000)
	return []string{"--target=" + r.Path, "--target-mode=" + mode, "--suite-name=" + mode, "--e2e-output=" + r.Out, "--cluster-name=" + cluster}
}

// Report judges what each mode's run wrote against the target's description, and writes
// report.md (the grid, what was changed from the chart's defaults and why, the stand-ins, where
// each mode's report is) and summary.json (the grid's cells) under Out. It returns the grid and
// the summaries the modes wrote.
func (r TargetRun) Report() (Grid, []report.Summary, error) {
	t := r.Target
	summaries, logs := map[string]*report.Summary{}, map[string]string{}
	var ran []report.Summary
	for _, m := range t.CertModes.Declared() {
		logs[m] = filepath.Join(suiterun.DisplayPath(r.Dir(m)), suiterun.LogFile)
		s, err := report.ReadSummary(filepath.Join(r.Dir(m), report.SummaryFile))
		if err != nil {
			summaries[m] = nil
			continue
		}
		summaries[m] = &s
		ran = append(ran, s)
	}
	g := NewGrid(t, summaries, logs)

	var b strings.Builder
	fmt.Fprintf(&b, "# Conformance of target %s\n\n%s\n\nSource: %s. Chart %s, release %s in namespace %s.\n\n",
		t.Name, t.Description, DescribeSource(t), t.Chart.Path, t.Chart.Release, t.Chart.Namespace)
	if len(ran) > 0 {
		fmt.Fprintf(&b, "Provider %s, Kubernetes %s.\n\n", ran[0].Provider, ran[0].KubernetesVersion)
	}
	b.WriteString(g.Markdown())
	if score := DoctorScore(ran); score != "" {
		b.WriteString("\n" + score + "\n")
	}
	overrides := func(heading string, list []target.Override) {
		if len(list) == 0 {
			return
		}
		b.WriteString("\n## " + heading + "\n\n")
		for _, o := range list {
			fmt.Fprintf(&b, "- `%s`: %s\n", o.Value, strings.Join(strings.Fields(o.Why), " "))
		}
	}
	overrides("Chart values changed from the defaults users get", t.Chart.Overrides)
	for _, m := range t.CertModes.Declared() {
		overrides("Values of mode "+m+" beyond what the target documents for it", t.CertModes.Mode(m).Overrides)
	}
	if len(t.Source.StandIns) > 0 {
		b.WriteString("\n## Stand-ins: images that cannot be built here, run as gauntlet's stand-in\n\n")
		for _, si := range t.Source.StandIns {
			fmt.Fprintf(&b, "- `%s` (%s), in place of %s: %s\n", si.Image, si.Runs, strings.Join(strings.Fields(si.Replaces), " "), strings.Join(strings.Fields(si.Why), " "))
		}
	}
	b.WriteString("\n## Each mode's report\n\n")
	for _, m := range t.CertModes.Declared() {
		fmt.Fprintf(&b, "- %s: [%s](%s/%s), [%s](%s/%s), [%s](%s/%s), artifacts of failures under %s/artifacts/\n", m,
			report.SummaryFile, m, report.SummaryFile, report.JUnitFile, m, report.JUnitFile, suiterun.LogFile, m, suiterun.LogFile, m)
	}
	if err := os.WriteFile(filepath.Join(r.Out, "report.md"), []byte(b.String()), 0o644); err != nil { //nolint:gosec // G306: a report for people to read
		return g, ran, err
	}
	data, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return g, ran, err
	}
	return g, ran, os.WriteFile(filepath.Join(r.Out, report.SummaryFile), append(data, '\n'), 0o644) //nolint:gosec // G306: a report for people to read
}

// DoctorScore is the generic doctor's precision and recall over the faults W6 and W7 left to it
// (a fault the target does not repair), for reports; "" when it ran against none.
func DoctorScore(ran []report.Summary) string {
	if score := doctor.ScoreOf(ran).String(); score != "" {
		return score + " (W6, W7: `kubectl webhook-doctor` against a fault the target does not repair)"
	}
	return ""
}

// DescribeSource says where t's images come from: its module and version, its source
// directory, or the images given.
func DescribeSource(t *target.Target) string {
	switch s := t.Source; {
	case s.Module != nil:
		return s.Module.Path + "@" + s.Module.Version
	case s.Dir != "":
		return "source " + filepath.Join(t.Dir(), s.Dir)
	}
	return "images " + strings.Join(t.Source.Images, ", ")
}
