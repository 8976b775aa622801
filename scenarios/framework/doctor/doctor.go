// Package doctor runs the workspace's webhook doctors the way users do — the kubectl plugin
// binary, `-o json` — and reads their documented JSON report. The doctors' packages belong to
// the operator module, whose internals the harness does not import: it builds them from the
// workspace and runs the binaries, and reads their report with the one package the operator
// publishes for it (operator/doctorreport). Which flags a doctor takes is its caller's
// business; this package knows what every doctor shares: how it is built, its exit statuses
// and its report.
package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gauntlet-dev/gauntlet/operator/doctorreport"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// Bounds of a doctor: building it (a cold build compiles client-go) and one run. A caller that
// passes the doctor its own --timeout gives it less than RunTimeout.
const (
	BuildTimeout = 10 * time.Minute
	RunTimeout   = 2 * time.Minute
)

// The doctors' exit statuses (their documented contract); any other is a usage or setup error.
const (
	ExitHealthy   = 0
	ExitUnhealthy = 1
)

// StatusFail is the status of a root cause in a report; failures that an upstream failure
// explains are "consequence", checks that could not run "skipped".
const StatusFail = doctorreport.StatusFail

// Program is one doctor of the workspace: a main package, built once per test process into the
// workspace's binary cache (nothing is left in /tmp, even when a suite is interrupted).
type Program struct {
	pkg string

	once sync.Once
	path string
	err  error
}

// The workspace's doctors.
var (
	// Dynamo is `kubectl dynamo doctor`: gauntlet's release layout (--release, -n).
	Dynamo = &Program{pkg: "./operator/cmd/kubectl-dynamo"}
	// Webhook is `kubectl webhook-doctor`: any operator's webhooks, from the webhook Service
	// and the serving Secret (--namespace, --service, --secret).
	Webhook = &Program{pkg: "./operator/cmd/kubectl-webhook-doctor"}
)

// ConnectArgs are the flags that say how a doctor reaches the webhook server directly (the
// served certificate): when this machine does not reach the cluster's Service and pod
// addresses (a kind node's, say), only through a port-forward — dialing a cluster address
// from here would leave the machine by its default route and meet whatever answers there.
func ConnectArgs(serviceNetworkFromHost bool) []string {
	if serviceNetworkFromHost {
		return nil
	}
	return []string{"--connect=port-forward"}
}

// Name is the program's name, as messages call it: kubectl-dynamo.
func (p *Program) Name() string { return filepath.Base(p.pkg) }

// Build builds the program from this workspace once (go build is incremental, so a warm build
// takes seconds) and returns its path; logf hears how long it took.
func (p *Program) Build(ctx context.Context, logf func(string, ...any)) (string, error) {
	p.once.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, BuildTimeout)
		defer cancel()
		start := time.Now()
		built, err := workspace.Build(ctx, workspace.BinDir(), workspace.BuildOptions{}, p.pkg)
		if err != nil {
			p.err = fmt.Errorf("building the doctor %s: %w", p.Name(), err)
			return
		}
		p.path = built[p.pkg]
		logf("built the doctor %s (%.1fs)", p.path, time.Since(start).Seconds())
	})
	return p.path, p.err
}

// Run builds the program if need be and runs it with args (which must ask for `-o json`),
// within RunTimeout. An exit status other than healthy or unhealthy (a usage or kubeconfig
// error) is an error quoting what the doctor printed on stderr.
func (p *Program) Run(ctx context.Context, logf func(string, ...any), args ...string) (Report, error) {
	bin, err := p.Build(ctx, logf)
	if err != nil {
		return Report{}, err
	}
	return run(ctx, p.Name(), bin, args)
}

// run runs the doctor binary bin (called name in messages) with args and reads its report.
func run(ctx context.Context, name, bin string, args []string) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, RunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...) //nolint:gosec // G204: the doctor binary just built, with its caller's flags
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := ExitHealthy
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		return Report{}, fmt.Errorf("running %s %s: %w", name, strings.Join(args, " "), err)
	}
	if code != ExitHealthy && code != ExitUnhealthy {
		return Report{}, fmt.Errorf("%s %s exited %d (expected %d healthy or %d unhealthy): %s",
			name, strings.Join(args, " "), code, ExitHealthy, ExitUnhealthy, strings.TrimSpace(stderr.String()))
	}
	return Parse(code, stdout.Bytes())
}

// Result is one check of a doctor's JSON report: the operator module's documented shape.
type Result = doctorreport.Result

// Report is one run of a doctor: its exit status and its checks.
type Report struct {
	ExitCode int
	Results  []Result
}

// Parse reads a doctor's `-o json` output, given its exit status.
func Parse(exitCode int, stdout []byte) (Report, error) {
	var results []Result
	if err := json.Unmarshal(stdout, &results); err != nil {
		return Report{}, fmt.Errorf("decoding the doctor's JSON report: %w (output: %q)", err, shorten(string(stdout), 300))
	}
	if len(results) == 0 {
		return Report{}, errors.New("the doctor's JSON report lists no checks")
	}
	return Report{ExitCode: exitCode, Results: results}, nil
}

// Roots are the root causes: the failed checks nothing upstream explains.
func (r Report) Roots() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Status == StatusFail {
			out = append(out, res)
		}
	}
	return out
}

// NamesRoot reports whether check id is among the root causes.
func (r Report) NamesRoot(id string) bool {
	for _, res := range r.Roots() {
		if res.ID == id {
			return true
		}
	}
	return false
}

// RootNames names the root causes as the doctor's summary line does: ["ca-bundle (T3)"].
func (r Report) RootNames() []string {
	var out []string
	for _, res := range r.Roots() {
		out = append(out, res.Name())
	}
	return out
}

// Healthy is the doctor's verdict "all ✓": exit status healthy and every check passed.
func (r Report) Healthy() bool {
	if r.ExitCode != ExitHealthy {
		return false
	}
	for _, res := range r.Results {
		if !res.OK {
			return false
		}
	}
	return true
}

// String is a compact account of every check that did not pass (or "all N checks passed"),
// for failure messages and the test log.
func (r Report) String() string {
	var lines []string
	for _, res := range r.Results {
		switch {
		case res.OK:
		case res.Status == StatusFail:
			lines = append(lines, fmt.Sprintf("✗ %s: %s", res.Name(), res.Cause))
		default:
			lines = append(lines, fmt.Sprintf("✗ %s (%s of %s)", res.ID, res.Status, strings.Join(res.DependsOn, ", ")))
		}
	}
	if len(lines) == 0 {
		return fmt.Sprintf("exit %d, all %d checks passed", r.ExitCode, len(r.Results))
	}
	return fmt.Sprintf("exit %d; %s", r.ExitCode, strings.Join(lines, "; "))
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
