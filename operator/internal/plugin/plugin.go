// Package plugin holds what gauntlet's kubectl plugins (kubectl-dynamo, kubectl-webhook-doctor)
// share: the connection and output flags of a doctor run, loading the kubeconfig as kubectl
// does, and turning a report into output and an exit status.
package plugin

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gauntlet-dev/gauntlet/operator/internal/doctor"
)

// Exit statuses of a doctor command.
const (
	// ExitHealthy: every check passed.
	ExitHealthy = 0
	// ExitUnhealthy: a check failed (or the report could not be written).
	ExitUnhealthy = 1
	// ExitUsage: the command line, the kubeconfig or the names to examine are wrong.
	ExitUsage = 2
)

// DoctorFlags are the settings every doctor command takes besides the names of what it
// examines.
type DoctorFlags struct {
	Kubeconfig, Context string
	// Output is "text" or "json".
	Output  string
	Timeout time.Duration
	Connect doctor.Connect
	connect string
}

// Register adds the flags to fs.
func (f *DoctorFlags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config).")
	fs.StringVar(&f.Context, "context", "", "kubeconfig context to use (default: the current context).")
	fs.StringVarP(&f.Output, "output", "o", "text", "Output format: text (one line per check) or json (an array of {id, title, ok, status, scenario, cause, fix, details, dependsOn}).")
	fs.DurationVar(&f.Timeout, "timeout", 2*time.Minute, "Upper bound for the whole run.")
	fs.StringVar(&f.connect, "connect", string(doctor.ConnectAuto), "How to reach the webhook server for the served-certificate check: auto (the Service's ClusterIP, then the endpoint pod IPs, then a port-forward when those are unreachable) or port-forward (only a port-forward through the API server to a ready endpoint pod; never dials a cluster address from this machine).")
}

// Validate checks the parsed flags.
func (f *DoctorFlags) Validate() error {
	if f.Output != "text" && f.Output != "json" {
		return fmt.Errorf("-o %q: want text or json", f.Output)
	}
	if f.Timeout <= 0 {
		return fmt.Errorf("--timeout=%s: must be positive", f.Timeout)
	}
	c, err := doctor.ParseConnect(f.connect)
	if err != nil {
		return fmt.Errorf("--connect=%s: want %s", f.connect, connectNames())
	}
	f.Connect = c
	return nil
}

// connectNames lists the values of --connect: "auto or port-forward".
func connectNames() string {
	var names []string
	for _, c := range doctor.ConnectModes() {
		names = append(names, string(c))
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// RESTConfig loads the kubeconfig the way kubectl does: --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config; --context overrides the current context. userAgent names the plugin to the
// API server.
func (f *DoctorFlags) RESTConfig(userAgent string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: f.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.UserAgent = userAgent
	return cfg, nil
}

// Finish writes report to stdout in the chosen format and returns the exit status; command
// prefixes the message of a failed write on stderr (best effort: the status carries the
// outcome).
func (f *DoctorFlags) Finish(report doctor.Report, command string, stdout, stderr io.Writer) int {
	write := report.WriteText
	if f.Output == "json" {
		write = report.WriteJSON
	}
	if err := write(stdout); err != nil {
		_, _ = fmt.Fprintln(stderr, command+": writing the report:", err)
		return ExitUnhealthy
	}
	if !report.Healthy() {
		return ExitUnhealthy
	}
	return ExitHealthy
}
