package troubleshooting

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// The doctor is the operator module's kubectl plugin (operator/cmd/kubectl-dynamo). Its package
// is internal to the operator module, so the scenarios run it the way users do — the binary,
// `kubectl dynamo doctor -o json` — and read its documented JSON report.

// doctorCommand is the plugin's package, relative to the workspace root.
const doctorCommand = "./operator/cmd/kubectl-dynamo"

// Bounds of the doctor: building it (a cold build compiles client-go) and one run.
const (
	doctorBuildTimeout = 10 * time.Minute
	doctorRunTimeout   = 2 * time.Minute
	doctorRepollPause  = time.Second
)

// The doctor's exit statuses (kubectl-dynamo's documented contract).
const (
	doctorExitHealthy   = 0
	doctorExitUnhealthy = 1
)

// doctorStatusFail is the status of a root cause in the doctor's JSON report; failures that an
// upstream failure explains are "consequence", checks that could not run "skipped".
const doctorStatusFail = "fail"

// doctorResult is one check of the doctor's JSON report.
type doctorResult struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	OK        bool     `json:"ok"`
	Status    string   `json:"status"`
	Scenario  string   `json:"scenario,omitempty"`
	Cause     string   `json:"cause,omitempty"`
	Fix       string   `json:"fix,omitempty"`
	Details   []string `json:"details,omitempty"`
	DependsOn []string `json:"dependsOn,omitempty"`
}

// doctorReport is one run of the doctor: its exit status and its checks.
type doctorReport struct {
	exitCode int
	results  []doctorResult
}

// parseDoctorReport reads the doctor's `-o json` output.
func parseDoctorReport(exitCode int, stdout []byte) (doctorReport, error) {
	var results []doctorResult
	if err := json.Unmarshal(stdout, &results); err != nil {
		return doctorReport{}, fmt.Errorf("decoding the doctor's JSON report: %w (output: %q)", err, shorten(string(stdout), 300))
	}
	if len(results) == 0 {
		return doctorReport{}, errors.New("the doctor's JSON report lists no checks")
	}
	return doctorReport{exitCode: exitCode, results: results}, nil
}

// roots are the root causes: the failed checks nothing upstream explains.
func (r doctorReport) roots() []doctorResult {
	var out []doctorResult
	for _, res := range r.results {
		if res.Status == doctorStatusFail {
			out = append(out, res)
		}
	}
	return out
}

// healthy is the doctor's verdict "all ✓": exit status 0 and every check passed.
func (r doctorReport) healthy() bool {
	if r.exitCode != doctorExitHealthy {
		return false
	}
	for _, res := range r.results {
		if !res.OK {
			return false
		}
	}
	return true
}

// rootNames names the root causes as the doctor's summary line does: "ca-bundle (T3)".
func (r doctorReport) rootNames() []string {
	var out []string
	for _, res := range r.roots() {
		out = append(out, rootName(res))
	}
	return out
}

func rootName(res doctorResult) string {
	if res.Scenario == "" {
		return res.ID
	}
	return res.ID + " (" + res.Scenario + ")"
}

// String is a compact account of every check that did not pass (or "all N checks passed"),
// for failure messages and the test log.
func (r doctorReport) String() string {
	var lines []string
	for _, res := range r.results {
		switch {
		case res.OK:
		case res.Status == doctorStatusFail:
			lines = append(lines, fmt.Sprintf("✗ %s: %s", rootName(res), res.Cause))
		default:
			lines = append(lines, fmt.Sprintf("✗ %s (%s of %s)", res.ID, res.Status, strings.Join(res.DependsOn, ", ")))
		}
	}
	if len(lines) == 0 {
		return fmt.Sprintf("exit %d, all %d checks passed", r.exitCode, len(r.results))
	}
	return fmt.Sprintf("exit %d; %s", r.exitCode, strings.Join(lines, "; "))
}

// doctorTarget is the release a doctor run examines and where it dry-runs objects.
type doctorTarget struct {
	release, namespace string
	// testNamespace is passed as --test-namespace; empty lets the doctor choose (the
	// restricted namespace, else "default").
	testNamespace string
}

func targetOf(r *chart.Release, testNamespace string) doctorTarget {
	return doctorTarget{release: r.Name, namespace: r.Namespace, testNamespace: testNamespace}
}

// args are the doctor's command line for the cluster at kubeconfig. When this machine does
// not reach the cluster's Service and pod addresses (serviceNetworkFromHost false), the doctor
// reaches the webhook only through a port-forward: dialing a cluster address from here would
// leave the machine by its default route.
func (d doctorTarget) args(kubeconfig string, serviceNetworkFromHost bool) []string {
	args := []string{"doctor", "--kubeconfig", kubeconfig, "--release", d.release, "--namespace", d.namespace,
		"-o", "json", "--timeout", (doctorRunTimeout - 10*time.Second).String()}
	if d.testNamespace != "" {
		args = append(args, "--test-namespace", d.testNamespace)
	}
	if !serviceNetworkFromHost {
		args = append(args, "--connect=port-forward")
	}
	return args
}

// doctorBinary is kubectl-dynamo, built once per test process into the workspace's binary
// cache (nothing is left in /tmp, even when the suite is interrupted).
var doctorBinary struct {
	once sync.Once
	path string
	err  error
}

// buildDoctor builds kubectl-dynamo from this workspace (go build is incremental, so a warm
// build takes seconds).
func buildDoctor(ctx context.Context, logf func(string, ...any)) (string, error) {
	doctorBinary.once.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, doctorBuildTimeout)
		defer cancel()
		start := time.Now()
		built, err := workspace.Build(ctx, workspace.BinDir(), workspace.BuildOptions{}, doctorCommand)
		if err != nil {
			doctorBinary.err = fmt.Errorf("building the doctor: %w", err)
			return
		}
		doctorBinary.path = built[doctorCommand]
		logf("built the doctor %s (%.1fs)", doctorBinary.path, time.Since(start).Seconds())
	})
	return doctorBinary.path, doctorBinary.err
}

// runDoctor runs `kubectl dynamo doctor -o json` against the cluster. An exit status other
// than healthy or unhealthy (a usage or kubeconfig error) is an error.
func runDoctor(ctx context.Context, t testing.TB, c *suite.Cluster, target doctorTarget) (doctorReport, error) {
	t.Helper()
	bin, err := buildDoctor(ctx, t.Logf)
	if err != nil {
		return doctorReport{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, doctorRunTimeout)
	defer cancel()
	args := target.args(c.KubeconfigPath(), c.ServiceNetworkFromHost())
	cmd := exec.CommandContext(ctx, bin, args...) //nolint:gosec // G204: the doctor binary just built, with the target's flags
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		return doctorReport{}, fmt.Errorf("running kubectl-dynamo %s: %w", strings.Join(args, " "), err)
	}
	if code != doctorExitHealthy && code != doctorExitUnhealthy {
		return doctorReport{}, fmt.Errorf("kubectl-dynamo %s exited %d: %s", strings.Join(args, " "), code, strings.TrimSpace(stderr.String()))
	}
	return parseDoctorReport(code, stdout.Bytes())
}

// expectDoctorNames runs the doctor and checks that it exits unhealthy naming exactly one root
// cause: the troubleshooting scenario id, found by check. Consequential failures (checks
// that fail because of that cause) are expected and reported as such by the doctor.
func expectDoctorNames(ctx context.Context, t *testing.T, c *suite.Cluster, target doctorTarget, id, check string) doctorReport {
	t.Helper()
	rep, err := runDoctor(ctx, t, c, target)
	expect.NoError(t, err, "running the doctor for release %s/%s", target.namespace, target.release)
	t.Logf("doctor: %s", rep)
	checkDoctorNames(t, rep, target, id, check)
	suite.Note(ctx, t, "doctorRootCauses", rep.rootNames())
	return rep
}

// checkDoctorNames is expectDoctorNames' verdict on a report already taken.
func checkDoctorNames(t *testing.T, rep doctorReport, target doctorTarget, id, check string) {
	t.Helper()
	want := check + " (" + id + ")"
	if rep.exitCode != doctorExitUnhealthy {
		expect.Errorf(t, "doctor for release %s/%s: expected exit status %d (unhealthy), saw %d: %s",
			target.namespace, target.release, doctorExitUnhealthy, rep.exitCode, rep)
	}
	if names := rep.rootNames(); !slices.Equal(names, []string{want}) {
		expect.Errorf(t, "doctor for release %s/%s: expected exactly one root cause, %s, saw %d: [%s] (%s)",
			target.namespace, target.release, want, len(names), strings.Join(names, ", "), rep)
	}
}

// expectDoctorHealthy waits until the doctor exits 0 with every check passed: the cluster is
// healthy again after a fix or a teardown.
func expectDoctorHealthy(ctx context.Context, t *testing.T, c *suite.Cluster, target doctorTarget, timeout time.Duration) {
	t.Helper()
	_, err := buildDoctor(ctx, t.Logf)
	expect.NoError(t, err, "preparing the doctor")
	what := fmt.Sprintf("the doctor to find release %s/%s healthy (exit 0, every check ✓)", target.namespace, target.release)
	expect.Eventually(ctx, t, what, timeout, func(ctx context.Context) (bool, string, error) {
		rep, err := runDoctor(ctx, t, c, target)
		if err == nil && rep.healthy() {
			return true, "", nil
		}
		seen := rep.String()
		if err != nil {
			seen = err.Error()
		}
		// A doctor run is dozens of API calls and two dry-runs: look again after a pause
		// rather than at the poll rate meant for single reads.
		select {
		case <-ctx.Done():
		case <-time.After(doctorRepollPause):
		}
		return false, seen, nil
	})
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// doctorNames is the assessment every scenario makes after injecting its fault: the doctor,
// run against the suite's release with *ns as its test namespace, names exactly check (the
// documented cause id) as the one root cause. ns is read when the step runs, after Setup set it.
func doctorNames(ns *string, id, check string) (string, features.Func) {
	return fmt.Sprintf("the doctor names %s (%s) as the one root cause", id, check),
		func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, r := suite.ClusterFrom(ctx, t), suite.ReleaseFrom(ctx, t)
			expectDoctorNames(ctx, t, c, targetOf(r, *ns), id, check)
			return ctx
		}
}
