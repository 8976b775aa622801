// Package chainsaw runs the Chainsaw tests (github.com/kyverno/chainsaw) a target directory
// holds, each as one row of a suite's report: scenarios/targets/<name>/chainsaw/<test>/
// chainsaw-test.yaml is the row <name>/<test>.
//
// Chainsaw runs as the binary hack/tool.sh builds from the version hack/tools/chainsaw pins
// (its runner sets global flags, so it cannot be linked into a test binary), one process per
// test: a test that does not load then breaks only its own row. Each process gets the target's
// names as Chainsaw values ($values.namespace, $values.service, …; Bindings), writes Chainsaw's
// JSON report and its output into the run's directory, and Run reads them back into a Result.
package chainsaw

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Dir is the directory of a target's Chainsaw tests, relative to its description.
const Dir = "chainsaw"

// TestFiles are the names Chainsaw loads a test from (its --test-file default, chainsaw-test,
// with either extension).
var TestFiles = []string{"chainsaw-test.yaml", "chainsaw-test.yml"}

// ConfigFile is the Chainsaw configuration a target may put in its Dir: passed with --config,
// so timeouts and the like apply to every test of the target. gauntlet's own flags (report,
// values, the test directory) still take precedence.
const ConfigFile = ".chainsaw.yaml"

// Test is one Chainsaw test directory of a target.
type Test struct {
	// Name is the directory's path under the target's Dir, slash-separated, e.g.
	// require-owner: the row is <target>/<Name>.
	Name string
	// Dir is the test's directory, File its chainsaw-test.yaml.
	Dir, File string
	// Description is the test's spec.description ("" when it has none or does not load): the
	// row's title.
	Description string
	// Config is the target's ConfigFile, "" without one.
	Config string
}

// ID is the test's row in a suite's report: <target>/<test>.
func (t Test) ID(target string) string { return target + "/" + t.Name }

// Title is the row's title: the test's description, or what it is.
func (t Test) Title() string {
	if t.Description != "" {
		return t.Description
	}
	return "Chainsaw test " + t.Name
}

// Discover lists the Chainsaw tests under targetDir's Dir, sorted by name; none when it has no
// such directory. A test directory inside another is an error: Chainsaw would run the inner
// test as part of the outer one's row.
func Discover(targetDir string) ([]Test, error) {
	root := filepath.Join(targetDir, Dir)
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	config := ""
	if _, err := os.Stat(filepath.Join(root, ConfigFile)); err == nil {
		config = filepath.Join(root, ConfigFile)
	}
	var tests []Test
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !slices.Contains(TestFiles, d.Name()) {
			return err
		}
		dir := filepath.Dir(path)
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		if rel == "." {
			return fmt.Errorf("test %s: put it in a directory of its own under %s (the directory names the report's row)", path, root)
		}
		tests = append(tests, Test{Name: filepath.ToSlash(rel), Dir: dir, File: path, Description: description(path), Config: config})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finding the Chainsaw tests of %s: %w", targetDir, err)
	}
	slices.SortFunc(tests, func(a, b Test) int { return strings.Compare(a.Name, b.Name) })
	for i, t := range tests {
		if i > 0 && t.Dir == tests[i-1].Dir {
			return nil, fmt.Errorf("tests %s and %s: one test file per directory (the directory names the report's row)", tests[i-1].File, t.File)
		}
		for _, outer := range tests[:i] {
			if strings.HasPrefix(t.Name, outer.Name+"/") {
				return nil, fmt.Errorf("test %s is inside test %s's directory: Chainsaw would run it as part of %s; move it beside", t.File, outer.File, outer.Name)
			}
		}
	}
	return tests, nil
}

// description is the spec.description of the test file's first document, "" when it has none
// or does not parse (Run reports that, with Chainsaw's own message).
func description(file string) string {
	data, err := os.ReadFile(file) //nolint:gosec // G304: a test file of the target's directory
	if err != nil {
		return ""
	}
	var doc struct {
		Spec struct {
			Description string `yaml:"description"`
		} `yaml:"spec"`
	}
	if yaml.Unmarshal(data, &doc) != nil {
		return ""
	}
	return strings.Join(strings.Fields(doc.Spec.Description), " ")
}

// Bindings are what a target's Chainsaw tests learn about the installed target, as Chainsaw
// values: a test reads them as $values.<key> (e.g. `($values.namespace)`).
type Bindings struct {
	Target     string   `yaml:"target"`     // the target's name
	Mode       string   `yaml:"mode"`       // the certificate mode: selfManaged, certManager or external
	Namespace  string   `yaml:"namespace"`  // the release namespace
	Release    string   `yaml:"release"`    // the Helm release
	Service    string   `yaml:"service"`    // the Service every webhook calls
	Secret     string   `yaml:"secret"`     // the Secret holding the serving certificate
	Deployment string   `yaml:"deployment"` // the Deployment whose pods serve the webhooks
	Webhooks   []string `yaml:"webhooks"`   // the webhooks' names, as in their configurations
}

// Args is Chainsaw's command line for test: its directory alone, these values, and Chainsaw's
// JSON report in reportDir. The kubeconfig goes in the environment (KUBECONFIG), where
// Chainsaw's client loading reads it.
func Args(test Test, valuesFile, reportDir string) []string {
	args := []string{"test", "--test-dir", test.Dir, "--values", valuesFile,
		"--report-format", "JSON", "--report-path", reportDir, "--report-name", strings.TrimSuffix(ReportFile, ".json"),
		"--no-color"}
	if test.Config != "" {
		args = append(args, "--config", test.Config)
	}
	return args
}

// Files Run writes into its directory: what a failed row's artifacts hold.
const (
	// ReportFile is Chainsaw's JSON report.
	ReportFile = "chainsaw-report.json"
	// OutputFile is Chainsaw's output (stdout and stderr).
	OutputFile = "chainsaw.log"
	// ValuesFile holds the Bindings passed with --values.
	ValuesFile = "values.yaml"
)

// Runner runs Chainsaw tests with one binary against one cluster.
type Runner struct {
	// Binary is the Chainsaw binary (Build).
	Binary string
	// Kubeconfig is the cluster's admin kubeconfig.
	Kubeconfig string
}

// Run runs test with bindings, writing ValuesFile, ReportFile and OutputFile into dir, and
// judges it from Chainsaw's report: passed, failed (each failed operation with its step and
// Chainsaw's error), skipped, or broken (Chainsaw could not load it; Chainsaw's message with
// the file and line). An error is Chainsaw not running at all or not saying what happened.
func (r Runner) Run(ctx context.Context, test Test, b Bindings, dir string) (Result, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return Result{}, err
	}
	values, err := yaml.Marshal(b) //nolint:gosec // G117: Secret is the serving Secret's name, not its content
	if err != nil {
		return Result{}, err
	}
	valuesFile := filepath.Join(dir, ValuesFile)
	if err := os.WriteFile(valuesFile, values, 0o600); err != nil {
		return Result{}, err
	}
	out, exit, err := run(ctx, r.Binary, Args(test, valuesFile, dir), dir, r.Kubeconfig)
	if werr := os.WriteFile(filepath.Join(dir, OutputFile), out, 0o600); werr != nil {
		return Result{}, werr
	}
	if err != nil {
		return Result{}, fmt.Errorf("running Chainsaw test %s (%s): %w", test.Name, r.Binary, err)
	}
	report, rerr := os.ReadFile(filepath.Join(dir, ReportFile)) //nolint:gosec // G304: the report Chainsaw just wrote
	return judge(test, exit, out, report, rerr)
}
