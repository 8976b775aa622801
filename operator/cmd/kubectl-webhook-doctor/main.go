// Command kubectl-webhook-doctor diagnoses any operator's admission webhooks. Installed on
// $PATH it runs as `kubectl webhook-doctor`: it finds the webhook configurations that call one
// Service and runs the doctor's generic checks against them (see internal/doctor's
// WebhookDoctor), naming the one root cause of a broken admission path and its fix.
//
//	kubectl webhook-doctor --namespace NS [--service NAME] [--secret NAME] [--configuration NAME]...
//	                       [--test-namespace default]
//	                       [--kubeconfig path] [--context name] [-o text|json] [--timeout 2m]
//	                       [--connect auto|port-forward]
//
// Exit status: 0 when every check passed, 1 when any failed, 2 for usage or kubeconfig errors
// (including a Service that cannot be chosen without --service).
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

// command prefixes every message.
const command = "kubectl webhook-doctor"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// flags are the command's settings.
type flags struct {
	namespace, service, secret, testNamespace string
	configurations                            []string
	plugin.DoctorFlags
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVarP(&f.namespace, "namespace", "n", "", "Namespace of the webhook Service (required).")
	fs.StringVar(&f.service, "service", "", "The webhook Service (default: the one Service in --namespace that webhook configurations or CRD conversion webhooks call).")
	fs.StringVar(&f.secret, "secret", "", "The Secret holding the serving certificate (default: the one Secret the serving container mounts; with none or several the certificate-secret check is skipped).")
	fs.StringSliceVar(&f.configurations, "configuration", nil, "A Validating- or MutatingWebhookConfiguration the operator's installation makes (repeatable); one not found is T1. Without them a configuration deleted beside another that still calls the Service goes unnoticed.")
	fs.StringVar(&f.testNamespace, "test-namespace", doctor.DefaultTestNamespace, "Namespace whose namespaceSelector match and dry-runs are checked.")
	f.Register(fs)
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, "Usage: kubectl webhook-doctor --namespace NS [flags]\n\nChecks the webhook configurations that call a Service, their caBundles and namespaceSelectors,\nthe Service, its endpoints, the served certificate, its Secret and server-side dry-runs, for any\noperator; exits 0 only when every check passes, 1 when one fails, 2 for usage errors.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if f.namespace == "" {
		return f, errors.New("--namespace is required: the namespace of the webhook Service")
	}
	return f, f.Validate()
}

// run executes the command line args and returns the exit status. Messages go to stderr best
// effort (`_, _ =`): the exit status carries the outcome.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return plugin.ExitHealthy
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, command+":", err)
		return plugin.ExitUsage
	}
	cfg, err := f.RESTConfig("kubectl-webhook-doctor")
	if err != nil {
		_, _ = fmt.Fprintln(stderr, command+":", err)
		return plugin.ExitUsage
	}
	d, err := doctor.NewWebhookDoctor(cfg, doctor.WebhookOptions{
		Namespace: f.namespace, Service: f.service, Secret: f.secret, Configurations: f.configurations,
		TestNamespace: f.testNamespace, Connect: f.Connect,
	})
	if err != nil {
		_, _ = fmt.Fprintln(stderr, command+":", err)
		return plugin.ExitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	report, err := d.Run(ctx)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, command+":", err)
		return plugin.ExitUsage
	}
	return f.Finish(report, command, stdout, stderr)
}
