// Command kubectl-dynamo is the Dynamo operator's kubectl plugin. Installed on $PATH it runs
// as `kubectl dynamo <command>`; its one command, doctor, runs the webhook troubleshooting
// checks against a release (see internal/doctor).
//
//	kubectl dynamo doctor [--release dynamo] [-n dynamo-system] [--test-namespace ns]
//	                      [--kubeconfig path] [--context name] [-o text|json] [--timeout 2m]
//	                      [--connect auto|port-forward]
//
// Exit status: 0 when every check passed, 1 when any failed, 2 for usage or kubeconfig errors.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/gauntlet-dev/gauntlet/operator/internal/doctor"
	"github.com/gauntlet-dev/gauntlet/operator/internal/plugin"
)

// Exit statuses (see plugin.ExitHealthy and the others).
const (
	exitHealthy   = plugin.ExitHealthy
	exitUnhealthy = plugin.ExitUnhealthy
	exitUsage     = plugin.ExitUsage
)

const usage = `kubectl dynamo — the Dynamo operator's kubectl plugin

Usage:
  kubectl dynamo doctor [flags]   check a release's admission webhooks, name the cause of a failure and its fix

Run 'kubectl dynamo doctor --help' for the doctor's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit status.
// Usage and error messages are written best effort (`_, _ =`): the exit status carries the
// outcome, and a failed write to stderr has nowhere else to be reported.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "doctor":
		return runDoctor(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		_, _ = fmt.Fprint(stdout, usage)
		return exitHealthy
	}
	_, _ = fmt.Fprintf(stderr, "kubectl dynamo: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// doctorFlags are the doctor command's settings.
type doctorFlags struct {
	release, namespace, testNamespace string
	chart                             string
	plugin.DoctorFlags
}

func parseDoctorFlags(args []string, stderr io.Writer) (doctorFlags, error) {
	var f doctorFlags
	fs := pflag.NewFlagSet("kubectl dynamo doctor", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.release, "release", "dynamo", "Helm release name of the operator.")
	fs.StringVarP(&f.namespace, "namespace", "n", "dynamo-system", "Release namespace, where the operator runs.")
	fs.StringVar(&f.testNamespace, "test-namespace", "", "Namespace whose namespaceSelector match and dry-runs are checked (default: the restricted namespace of a namespace-restricted release, else \"default\").")
	fs.StringVar(&f.chart, "chart", doctor.DefaultChart, "Chart reference printed in `helm upgrade` fix commands.")
	f.Register(fs)
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, "Usage: kubectl dynamo doctor [flags]\n\nChecks the release's webhook configurations, caBundles, served certificate, Service endpoints,\nnamespaceSelector, Secret, cert-controller RBAC, operator logs and a server-side dry-run; exits 0\nonly when every check passes. For any other operator's webhooks: kubectl webhook-doctor.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return f, f.Validate()
}

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseDoctorFlags(args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return exitHealthy
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "kubectl dynamo doctor:", err)
		return exitUsage
	}
	cfg, err := f.RESTConfig("kubectl-dynamo")
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "kubectl dynamo doctor:", err)
		return exitUsage
	}
	d, err := doctor.New(cfg, doctor.Options{
		Release: f.release, Namespace: f.namespace, TestNamespace: f.testNamespace, Chart: f.chart, Connect: f.Connect,
	})
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "kubectl dynamo doctor:", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	return f.Finish(d.Run(ctx), "kubectl dynamo doctor", stdout, stderr)
}
