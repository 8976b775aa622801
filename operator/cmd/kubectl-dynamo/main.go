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
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gauntlet-dev/gauntlet/operator/internal/doctor"
)

// Exit statuses.
const (
	exitHealthy   = 0
	exitUnhealthy = 1
	exitUsage     = 2
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
	kubeconfig, context               string
	output                            string
	chart                             string
	connect                           doctor.Connect
	timeout                           time.Duration
}

func parseDoctorFlags(args []string, stderr io.Writer) (doctorFlags, error) {
	var f doctorFlags
	fs := pflag.NewFlagSet("kubectl dynamo doctor", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.release, "release", "dynamo", "Helm release name of the operator.")
	fs.StringVarP(&f.namespace, "namespace", "n", "dynamo-system", "Release namespace, where the operator runs.")
	fs.StringVar(&f.testNamespace, "test-namespace", "", "Namespace whose namespaceSelector match and dry-runs are checked (default: the restricted namespace of a namespace-restricted release, else \"default\").")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config).")
	fs.StringVar(&f.context, "context", "", "kubeconfig context to use (default: the current context).")
	fs.StringVarP(&f.output, "output", "o", "text", "Output format: text (one line per check) or json (an array of {id, title, ok, status, scenario, cause, fix, details, dependsOn}).")
	fs.StringVar(&f.chart, "chart", doctor.DefaultChart, "Chart reference printed in `helm upgrade` fix commands.")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "Upper bound for the whole run.")
	connect := fs.String("connect", string(doctor.ConnectAuto), "How to reach the webhook server for the served-certificate check: auto (the Service's ClusterIP, then the endpoint pod IPs, then a port-forward when those are unreachable) or port-forward (only a port-forward through the API server to a ready endpoint pod; never dials a cluster address from this machine).")
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, "Usage: kubectl dynamo doctor [flags]\n\nChecks the release's webhook configurations, caBundles, served certificate, Service endpoints,\nnamespaceSelector, Secret, cert-controller RBAC, operator logs and a server-side dry-run; exits 0\nonly when every check passes.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if f.output != "text" && f.output != "json" {
		return f, fmt.Errorf("-o %q: want text or json", f.output)
	}
	if f.timeout <= 0 {
		return f, fmt.Errorf("--timeout=%s: must be positive", f.timeout)
	}
	c, err := doctor.ParseConnect(*connect)
	if err != nil {
		return f, fmt.Errorf("--connect=%s: want %s", *connect, connectNames())
	}
	f.connect = c
	return f, nil
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
	cfg, err := restConfig(f.kubeconfig, f.context)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "kubectl dynamo doctor:", err)
		return exitUsage
	}
	d, err := doctor.New(cfg, doctor.Options{
		Release: f.release, Namespace: f.namespace, TestNamespace: f.testNamespace, Chart: f.chart, Connect: f.connect,
	})
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "kubectl dynamo doctor:", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	report := d.Run(ctx)
	write := report.WriteText
	if f.output == "json" {
		write = report.WriteJSON
	}
	if err := write(stdout); err != nil {
		_, _ = fmt.Fprintln(stderr, "kubectl dynamo doctor: writing the report:", err)
		return exitUnhealthy
	}
	if !report.Healthy() {
		return exitUnhealthy
	}
	return exitHealthy
}

// connectNames lists the values of --connect: "auto or port-forward".
func connectNames() string {
	var names []string
	for _, c := range doctor.ConnectModes() {
		names = append(names, string(c))
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// restConfig loads the kubeconfig the way kubectl does: --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config; --context overrides the current context.
func restConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-dynamo"
	return cfg, nil
}
