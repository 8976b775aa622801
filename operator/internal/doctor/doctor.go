package doctor

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator/doctorreport"
	"github.com/gauntlet-dev/gauntlet/operator/internal/certs"
	"github.com/gauntlet-dev/gauntlet/operator/internal/scheme"
)

// Status is how a check ended (doctorreport.Status).
type Status = doctorreport.Status

// The statuses of a Result; see the package documentation for how they are decided.
const (
	StatusPass        = doctorreport.StatusPass
	StatusFail        = doctorreport.StatusFail
	StatusConsequence = doctorreport.StatusConsequence
	StatusSkipped     = doctorreport.StatusSkipped
)

// Result is one check's outcome: what the JSON report prints (doctorreport.Result), and
// whether a skip had nothing to examine.
type Result struct {
	doctorreport.Result
	// inapplicable marks a skip for want of something to examine that no fault explains (the
	// serving container mounts no Secret the doctor could name): it does not make the report
	// unhealthy. Not printed in JSON, whose shape is fixed; the skip's cause says why.
	inapplicable bool
}

// Report is the outcome of every check, in the order they ran.
type Report []Result

// Healthy reports whether every check passed (or had nothing to examine, see Result).
func (r Report) Healthy() bool {
	for _, res := range r {
		if !res.OK && !res.inapplicable {
			return false
		}
	}
	return len(r) > 0
}

// Roots returns the root causes: the checks with StatusFail.
func (r Report) Roots() []Result {
	var out []Result
	for _, res := range r {
		if res.Status == StatusFail {
			out = append(out, res)
		}
	}
	return out
}

// Find returns the result of the check id.
func (r Report) Find(id string) (Result, bool) {
	for _, res := range r {
		if res.ID == id {
			return res, true
		}
	}
	return Result{}, false
}

// Options say which release to examine and how.
type Options struct {
	// Release is the Helm release name (objects are named <release>-…).
	Release string
	// Namespace is the release namespace, where the operator runs.
	Namespace string
	// TestNamespace is where the namespaceSelector match and the dry-runs are checked. Empty:
	// the restricted namespace of a namespace-restricted release, else "default".
	TestNamespace string
	// Chart is the chart reference printed in `helm upgrade` fix commands.
	Chart string
	// DialTimeout bounds each TCP connect to the webhook (default 5s), and its TLS handshake
	// when no webhook that trusts the caBundle has a timeoutSeconds (which bounds it otherwise).
	DialTimeout time.Duration
	// Now is the clock certificates are judged by (default time.Now).
	Now func() time.Time
	// Connect says how checks that talk to the webhook server directly (the served
	// certificate) reach it (default ConnectAuto).
	Connect Connect
}

// Connect is how the doctor reaches the webhook server for the checks that talk to it
// directly.
type Connect string

// The ways to reach the webhook server.
const (
	// ConnectAuto dials the Service's ClusterIP, then the ready endpoints, and port-forwards
	// through the API server to an endpoint Pod only when none of them accepted a connection
	// (and not all of them refused it).
	ConnectAuto Connect = "auto"
	// ConnectPortForward never dials a ClusterIP or Pod IP: it port-forwards through the API
	// server to a ready endpoint Pod straight away. For machines outside the cluster network,
	// where dialing a cluster address would leave the machine by its default route.
	ConnectPortForward Connect = "port-forward"
)

// ConnectModes are the valid values of Options.Connect (and of kubectl-dynamo's --connect).
func ConnectModes() []Connect { return []Connect{ConnectAuto, ConnectPortForward} }

// ParseConnect returns the Connect named s, or an error naming the allowed values.
func ParseConnect(s string) (Connect, error) {
	for _, c := range ConnectModes() {
		if string(c) == s {
			return c, nil
		}
	}
	var names []string
	for _, c := range ConnectModes() {
		names = append(names, string(c))
	}
	return "", fmt.Errorf("connect mode %q: want one of %s", s, strings.Join(names, ", "))
}

// DefaultChart is the chart reference of fix commands when Options.Chart is empty: the
// chart's path in this repository, where `make doctor` runs.
const DefaultChart = "charts/dynamo-operator"

func (o Options) withDefaults() Options {
	if o.Chart == "" {
		o.Chart = DefaultChart
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Connect == "" {
		o.Connect = ConnectAuto
	}
	return o
}

func (o Options) validate() error {
	var missing []string
	if o.Release == "" {
		missing = append(missing, "release")
	}
	if o.Namespace == "" {
		missing = append(missing, "namespace")
	}
	if len(missing) > 0 {
		return fmt.Errorf("doctor options: %s must be set", strings.Join(missing, " and "))
	}
	if o.Connect != "" {
		if _, err := ParseConnect(string(o.Connect)); err != nil {
			return fmt.Errorf("doctor options: %w", err)
		}
	}
	return nil
}

// Doctor examines one release.
type Doctor struct {
	opts      Options
	cfg       *rest.Config
	client    client.Client
	clientset kubernetes.Interface
	// dial opens the TCP connections to the webhook server (direct or to a port-forward's
	// local end); forward port-forwards to a Pod's port. Tests replace them; nil means the
	// real ones.
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	forward func(ctx context.Context, pod string, port int32) (addr string, stop func() error, err error)
}

// New returns a Doctor that examines a release of gauntlet's operator through cfg.
func New(cfg *rest.Config, opts Options) (*Doctor, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return newDoctor(cfg, opts)
}

// newDoctor connects a Doctor with validated options to cfg's cluster.
func newDoctor(cfg *rest.Config, opts Options) (*Doctor, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("building a client for %s: %w", cfg.Host, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building a clientset for %s: %w", cfg.Host, err)
	}
	return &Doctor{opts: opts.withDefaults(), cfg: cfg, client: c, clientset: cs}, nil
}

// Run executes every check and returns the report. It never returns early: a check that
// cannot run is reported as skipped. ctx bounds the whole run.
func (d *Doctor) Run(ctx context.Context) Report {
	return d.run(ctx, allChecks())
}

// outcome is what a check's function returns; the runner turns it into a Result.
type outcome struct {
	title    string
	ok       bool
	scenario string
	cause    string
	fix      string
	details  []string
	// skipped is set when the check found it cannot run (e.g. nothing to examine because
	// the objects it reads are missing, which an upstream check reported).
	skipped string
	// inapplicable: the skip is not explained by a fault (see Result).
	inapplicable bool
}

func pass(title string, details ...string) outcome {
	return outcome{title: title, ok: true, details: details}
}

func failure(title string, c cause, details ...string) outcome {
	return outcome{title: title, scenario: c.scenario, cause: c.text, fix: c.fix, details: details}
}

func skip(title, reason string) outcome { return outcome{title: title, skipped: reason} }

// inapplicable is a skip that does not make the report unhealthy: the check has nothing to
// examine and no fault explains it (see Result).
func inapplicable(title, reason string) outcome {
	return outcome{title: title, skipped: reason, inapplicable: true}
}

// check is one documented check.
type check struct {
	id string
	// title is shown when the check is skipped before it could compute its own.
	title string
	needs []string
	after []string
	run   func(ctx context.Context, s *session) outcome
}

// modeUnknown is the certificate mode of any operator's webhook: who issues its certificate
// and injects its caBundle is not known, so fixes say what must happen, not which command of
// gauntlet's chart does it.
const modeUnknown certs.Mode = ""

// forRelease reports whether the session examines a release of gauntlet's operator (rather
// than any operator's webhook Service).
func (s *session) forRelease() bool { return s.opts.Release != "" }

// session carries what checks found for the checks after them.
type session struct {
	*Doctor
	facts
	results map[string]Result
}

// run runs checks for a release, its names the chart's defaults until checkDeployment reads
// the operator's arguments.
func (d *Doctor) run(ctx context.Context, checks []check) Report {
	return d.newSession(defaultFacts(d.opts)).runChecks(ctx, checks)
}

func (d *Doctor) newSession(f facts) *session {
	return &session{Doctor: d, facts: f, results: map[string]Result{}}
}

// runChecks runs checks in order; checks of an earlier runChecks of the session count as
// upstream of them.
func (s *session) runChecks(ctx context.Context, checks []check) Report {
	var report Report
	for _, c := range checks {
		res := Result{Result: doctorreport.Result{ID: c.id, Title: c.title}}
		if err := ctx.Err(); err != nil {
			res.Status = StatusSkipped
			res.Cause = "skipped: the doctor ran out of time (--timeout): " + err.Error()
		} else if blocked := s.notPassed(c.needs); len(blocked) > 0 {
			res.Status = StatusSkipped
			res.DependsOn = s.rootsOf(blocked)
			res.Cause = "skipped: depends on " + strings.Join(blocked, ", ")
		} else {
			o := c.run(ctx, s)
			if o.title != "" {
				res.Title = o.title
			}
			res.Details = o.details
			switch {
			case o.skipped != "":
				res.Status = StatusSkipped
				res.Cause = "skipped: " + o.skipped
				res.DependsOn = s.rootsOf(s.notPassed(append(slices.Clone(c.needs), c.after...)))
				res.inapplicable = o.inapplicable && len(res.DependsOn) == 0
			case o.ok:
				res.Status, res.OK = StatusPass, true
			default:
				res.Scenario, res.Cause, res.Fix = o.scenario, o.cause, o.fix
				res.Status = StatusFail
				if upstream := s.notPassed(append(slices.Clone(c.needs), c.after...)); len(upstream) > 0 {
					res.Status = StatusConsequence
					res.DependsOn = s.rootsOf(upstream)
				}
			}
		}
		report = append(report, res)
		s.results[c.id] = res
	}
	return report
}

// notPassed returns the ids among ids that ran and did not pass, in order. Checks that did
// not run at all (a subset of checks was run) are ignored.
func (s *session) notPassed(ids []string) []string {
	var out []string
	for _, id := range ids {
		if r, ok := s.results[id]; ok && r.Status != StatusPass && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// rootsOf follows non-passing upstream checks back to the root causes behind them.
func (s *session) rootsOf(ids []string) []string {
	var out []string
	var visit func(id string)
	visit = func(id string) {
		r, ok := s.results[id]
		if !ok {
			return
		}
		if r.Status == StatusFail {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
			return
		}
		for _, up := range r.DependsOn {
			visit(up)
		}
	}
	for _, id := range ids {
		visit(id)
	}
	return out
}
