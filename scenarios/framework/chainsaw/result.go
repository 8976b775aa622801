package chainsaw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
)

// Outcome is a Chainsaw test's result as a row of the report.
type Outcome string

// The outcomes. Broken is not a failed check: the test never ran, because Chainsaw could not
// load it.
const (
	Passed  Outcome = "passed"
	Failed  Outcome = "failed"
	Skipped Outcome = "skipped"
	Broken  Outcome = "broken"
)

// Result is what one Chainsaw test did.
type Result struct {
	Outcome Outcome
	// Message says why the row is not passed: every failed operation, or Chainsaw's message
	// on a test it could not load (with file and line), or why it was skipped.
	Message string
	// Failures are the failed operations, in the report's order.
	Failures []Failure
}

// Failure is one failed operation of Chainsaw's report.
type Failure struct {
	Test, Step, Operation, Type, Error string
}

func (f Failure) String() string {
	op := f.Type
	if f.Operation != "" && f.Operation != f.Type {
		op += " " + f.Operation
	}
	return fmt.Sprintf("step %q, %s: %s", f.Step, op, oneLine(f.Error))
}

// jsonReport is Chainsaw's JSON report (--report-format JSON), the fields read here.
type jsonReport struct {
	Tests []struct {
		Name    string `json:"name"`
		Skipped bool   `json:"skipped"`
		Steps   []struct {
			Name       string `json:"name"`
			Operations []struct {
				Name    string `json:"name"`
				Type    string `json:"type"`
				Failure *struct {
					Error string `json:"error"`
				} `json:"failure"`
			} `json:"operations"`
		} `json:"steps"`
	} `json:"tests"`
}

// ParseReport judges Chainsaw's JSON report of one test directory: failed when an operation
// failed, skipped when every test in it was skipped, else passed.
func ParseReport(data []byte) (Result, error) {
	var r jsonReport
	if err := json.Unmarshal(data, &r); err != nil {
		return Result{}, fmt.Errorf("reading Chainsaw's report: %w", err)
	}
	if len(r.Tests) == 0 {
		return Result{Outcome: Failed, Message: "Chainsaw's report lists no test"}, nil
	}
	var res Result
	skipped := 0
	for _, t := range r.Tests {
		if t.Skipped {
			skipped++
		}
		for _, s := range t.Steps {
			for _, op := range s.Operations {
				if op.Failure != nil {
					res.Failures = append(res.Failures, Failure{Test: t.Name, Step: s.Name, Operation: op.Name, Type: op.Type, Error: op.Failure.Error})
				}
			}
		}
	}
	switch {
	case len(res.Failures) > 0:
		res.Outcome = Failed
		msgs := make([]string, len(res.Failures))
		for i, f := range res.Failures {
			msgs[i] = f.String()
			if len(r.Tests) > 1 {
				msgs[i] = "test " + f.Test + ", " + msgs[i]
			}
		}
		res.Message = strings.Join(msgs, "; ")
	case skipped == len(r.Tests):
		res.Outcome = Skipped
		res.Message = "skipped by the test itself (spec.skip)"
	default:
		res.Outcome = Passed
	}
	return res, nil
}

// Markers of Chainsaw's output (pkg/commands/test): it prints loadingTests before it loads the
// test files and loadingValues once every one loaded.
const (
	loadingTests  = "Loading tests..."
	loadingValues = "Loading values..."
)

// judge turns a finished Chainsaw process (its exit code and output) and its report (or the
// error reading it) into a Result.
func judge(test Test, exit int, out, report []byte, reportErr error) (Result, error) {
	if reportErr == nil {
		res, err := ParseReport(report)
		if err != nil {
			return Result{}, err
		}
		if res.Outcome != Failed && exit != 0 {
			return Result{Outcome: Failed, Message: fmt.Sprintf("Chainsaw exited %d though its report has no failed operation: %s", exit, lastError(out))}, nil
		}
		return res, nil
	}
	if !errors.Is(reportErr, fs.ErrNotExist) {
		return Result{}, reportErr
	}
	if exit == 0 {
		return Result{}, fmt.Errorf("the Chainsaw process exited 0 without writing %s", ReportFile)
	}
	if bytes.Contains(out, []byte(loadingTests)) && !bytes.Contains(out, []byte(loadingValues)) {
		return Result{Outcome: Broken, Message: brokenMessage(test, lastError(out))}, nil
	}
	return Result{Outcome: Failed, Message: fmt.Sprintf("Chainsaw exited %d before running the test: %s", exit, lastError(out))}, nil
}

// lastError is the error Chainsaw ended with (cobra's "Error: …" line), or its last line.
func lastError(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if msg, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "Error: "); ok {
			return msg
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// brokenMessage is Chainsaw's message on a test it could not load, led by the file and, where
// Chainsaw's message does not give one, the line it points at (Locate).
func brokenMessage(test Test, msg string) string {
	where := test.File
	if line := Locate(test.File, msg); line > 0 {
		where = fmt.Sprintf("%s:%d", test.File, line)
	}
	return fmt.Sprintf("%s: Chainsaw cannot load the test: %s", where, msg)
}

// run runs bin with args in dir against the cluster of kubeconfig, and returns its combined
// output and exit code; err is only a process that could not run or was stopped.
func run(ctx context.Context, bin string, args []string, dir, kubeconfig string) ([]byte, int, error) {
	cmd := exec.CommandContext(ctx, bin, args...) //nolint:gosec // G204: the Chainsaw binary hack/tool.sh built
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return out.Bytes(), -1, fmt.Errorf("stopped: %w", ctx.Err())
	case errors.As(err, &exit):
		return out.Bytes(), exit.ExitCode(), nil
	case err != nil:
		return out.Bytes(), -1, err
	}
	return out.Bytes(), 0, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
