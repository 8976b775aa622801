// Package troubleshooting holds the troubleshooting scenarios (CATALOG.md §T) as
// e2e-framework features, labelled scenario=<ID>. Each one walks the documentation's
// troubleshooting entry the way a user meets it:
//
//  1. the cluster starts healthy: the doctor (`kubectl dynamo doctor`) exits 0;
//  2. the fault is injected (a deleted object, a wrong value, a bad certificate, …);
//  3. the symptom a user sees is asserted — the API server's error text, verbatim where
//     CATALOG.md quotes it (its stable part: no generated names, IPs or ports), or an invalid
//     object admitted;
//  4. the doctor exits non-zero naming exactly that cause as its one root cause;
//  5. the documented fix is applied and admission works again;
//  6. the teardown restores the suite's release whatever happened and checks, with the
//     doctor, that the cluster is healthy for the next scenario.
//
// The scenarios share the suite's release (automatic certificate mode, the chart's defaults)
// and change it only for their own duration, with `helm upgrade` and the values a user would
// set (T2 namespaceSelector, T7 failurePolicy, T9 timeoutSeconds and the test-only latency
// injection). T4 and T5 need external mode: each installs its own namespace-restricted release
// in external mode in its own namespace, next to the suite's (the multi-operator topology),
// and uninstalls it afterwards. T3, T10 and T11 are about the automatic mode's cert-controller
// and are labelled certmode=automatic.
package troubleshooting

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// Features are the troubleshooting scenarios T1–T13.
func Features() []types.Feature {
	return []types.Feature{
		deletedValidatingConfiguration(),
		unmatchedNamespaceSelector(),
		foreignCABundle(),
		wrongSAN(),
		expiredCertificate(),
		operatorDownFail(),
		operatorDownIgnore(),
		deletedService(),
		slowWebhook(),
		missingRBAC(),
		deletedSecret(),
		stuckTerminating(),
		stalledRollout(),
	}
}

// Bounds for what the cluster does after a change. They are generous on purpose: the machine
// is shared, and a scenario that times out says what it waited for and what it last saw.
const (
	// rolloutTimeout bounds a Deployment rollout, a scale or an uninstall.
	rolloutTimeout = 3 * time.Minute
	// admissionTimeout bounds the wait for the webhooks to answer again after a fix.
	admissionTimeout = 2 * time.Minute
	// healthyTimeout bounds the wait for the doctor to find the cluster healthy.
	healthyTimeout = 2 * time.Minute
	// propagationTimeout bounds how long the API server takes to act on a change of a
	// webhook configuration, a namespace label, RBAC or an admission policy (informers).
	propagationTimeout = time.Minute
	// secretVolumeTimeout bounds how long a changed Secret takes to reach a running pod's
	// volume and be served: the kubelet rewrites Secret volumes when it next syncs the pod, up
	// to its sync period (1 min) plus 50% jitter later, and the operator's certificate watcher
	// polls every 10 s. (On local the node agent watches Secrets: about a second.)
	secretVolumeTimeout = 2 * time.Minute
	// baselineTimeout bounds the wait for a healthy cluster before a scenario starts; the
	// previous scenario's teardown already waited for it, so this only absorbs a slow doctor.
	baselineTimeout = 30 * time.Second
)

// graphName is the object every scenario creates, per scenario namespace.
const graphName = "graph"

// createGraph creates obj for real (not a dry run): what `kubectl create` shows a user.
func createGraph(ctx context.Context, c *suite.Cluster, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
}

// graphRef names a graph in messages.
func graphRef(obj *unstructured.Unstructured) string {
	return "DynamoGraphDeployment " + obj.GetNamespace() + "/" + obj.GetName()
}

// quoted is a stable part of an error text, matched literally.
func quoted(s string) *regexp.Regexp { return regexp.MustCompile(regexp.QuoteMeta(s)) }

// failedCallPrefix is how the API server starts the error of a webhook call that failed
// (as opposed to a webhook that answered with a denial).
var failedCallPrefix = regexp.MustCompile(`failed calling webhook "[^"]+": failed to call webhook`)

// expectFailsWith checks that doing failed with an error containing every part, in order.
func expectFailsWith(t *testing.T, doing string, err error, parts ...*regexp.Regexp) {
	t.Helper()
	want := describeParts(parts)
	if err == nil {
		expect.Errorf(t, "%s: expected it to fail with %s, saw it admitted", doing, want)
		return
	}
	if !containsInOrder(err.Error(), parts) {
		expect.Errorf(t, "%s: expected an error with %s, saw %q", doing, want, err.Error())
	}
}

// expectEventuallyFailsWith repeats do until it fails with an error containing every part, in
// order. Right after the operator's pods changed, the API server may still send a call over a
// connection it had open to an old pod and see "EOF" or a reset instead of the lasting
// symptom; a success, though, is never the symptom and stops the test at once.
func expectEventuallyFailsWith(ctx context.Context, t *testing.T, doing string, timeout time.Duration, do func(ctx context.Context) error, parts ...*regexp.Regexp) {
	t.Helper()
	want := describeParts(parts)
	expect.Eventually(ctx, t, doing+" to fail with "+want, timeout, func(ctx context.Context) (bool, string, error) {
		err := do(ctx)
		if err == nil {
			return false, "", fmt.Errorf("%s: expected it to fail with %s, saw it admitted", doing, want)
		}
		return containsInOrder(err.Error(), parts), err.Error(), nil
	})
}

// expectCreateFailsWith is the symptom of a webhook that cannot be called: creating a valid
// graph in ns fails with parts. It waits (with dry runs) until the lasting error shows, then
// checks that a real create — what a user runs — fails the same way.
func expectCreateFailsWith(ctx context.Context, t *testing.T, c *suite.Cluster, ns string, parts ...*regexp.Regexp) {
	t.Helper()
	expectEventuallyFailsWith(ctx, t, "a server-side dry-run create of "+graphRef(dryRunProbe(ns)), propagationTimeout, func(ctx context.Context) error {
		return dryRunCreateProbe(ctx, c, ns)
	}, parts...)
	obj := dynamo.GraphDeployment(ns, graphName)
	_, err := createGraph(ctx, c, obj)
	expectFailsWith(t, "creating "+graphRef(obj), err, parts...)
}

// dryRunProbe is the valid graph the symptom checks create with a server-side dry run.
func dryRunProbe(ns string) *unstructured.Unstructured { return dynamo.GraphDeployment(ns, "probe") }

// dryRunCreateProbe creates dryRunProbe(ns) with a server-side dry run: admission runs, nothing
// is stored.
func dryRunCreateProbe(ctx context.Context, c *suite.Cluster, ns string) error {
	_, err := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, dryRunProbe(ns), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func describeParts(parts []*regexp.Regexp) string {
	var q []string
	for _, p := range parts {
		q = append(q, "`"+p.String()+"`")
	}
	return strings.Join(q, " … ")
}

// containsInOrder reports whether each pattern matches text after the previous match.
func containsInOrder(text string, parts []*regexp.Regexp) bool {
	rest := text
	for _, p := range parts {
		loc := p.FindStringIndex(rest)
		if loc == nil {
			return false
		}
		rest = rest[loc[1]:]
	}
	return true
}

// expectDenied checks that the operator's validating webhook judged and denied an invalid graph
// in namespace ns: admission works there.
func expectDenied(ctx context.Context, t *testing.T, c *suite.Cluster, ns, name string) {
	t.Helper()
	obj := dynamo.InvalidGraphDeployment(ns, name)
	_, err := createGraph(ctx, c, obj)
	want := dynamo.DeniedBy(dynamo.GraphDeploymentValidatingWebhook)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "spec.services") {
		expect.Errorf(t, "creating %s without services: expected a denial containing %q and %q, saw %v", graphRef(obj), want, "spec.services", errOrAdmitted(err))
	}
}

// expectEventuallyDenied waits until an invalid graph in ns is denied by the operator (a fix
// takes effect once informers and the operator caught up).
func expectEventuallyDenied(ctx context.Context, t *testing.T, c *suite.Cluster, ns, name string, timeout time.Duration) {
	t.Helper()
	want := dynamo.DeniedBy(dynamo.GraphDeploymentValidatingWebhook)
	what := fmt.Sprintf("an invalid DynamoGraphDeployment %s/%s (no services) to be denied with %q", ns, name, want)
	expect.Eventually(ctx, t, what, timeout, func(ctx context.Context) (bool, string, error) {
		obj := dynamo.InvalidGraphDeployment(ns, name)
		_, err := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return false, "admitted", nil
		}
		return strings.Contains(err.Error(), want), err.Error(), nil
	})
}

// expectAdmittedUnvalidated checks the symptom of T1, T2 and T7: an invalid graph is stored,
// and no operator webhook touched it (the mutating webhook's origin-version stamp is absent
// when mutating is off too, which mutatingRan says).
func expectAdmittedUnvalidated(ctx context.Context, t *testing.T, c *suite.Cluster, ns string, mutatingRan bool) {
	t.Helper()
	obj := dynamo.InvalidGraphDeployment(ns, graphName)
	got, err := createGraph(ctx, c, obj)
	if err != nil {
		expect.Fatalf(t, "creating %s without services: expected it accepted (validation is not running), saw %v", graphRef(obj), err)
	}
	c.AdmittedInvalid(dynamo.GraphDeployments.Resource, ns, graphName)
	_, stamped := got.GetAnnotations()[dynamo.OriginVersionAnnotation]
	if stamped != mutatingRan {
		expect.Errorf(t, "%s: expected the mutating webhook's %s annotation present=%t, saw present=%t (annotations %v)",
			graphRef(obj), dynamo.OriginVersionAnnotation, mutatingRan, stamped, got.GetAnnotations())
	}
}

func errOrAdmitted(err error) string {
	if err == nil {
		return "it admitted"
	}
	return err.Error()
}

// ignoreNotFound treats a missing object as already gone.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// baseline is every scenario's first step: the scenario namespace, and a healthy cluster as
// the doctor sees it — so that a scenario failing here says the previous one left damage.
func baseline(prefix string, ns *string) func(context.Context, *testing.T, *envconf.Config) context.Context {
	return suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
		*ns = suite.Namespace(ctx, t, prefix)
		expectDoctorHealthy(ctx, t, c, targetOf(r, *ns), baselineTimeout)
		return ctx
	})
}

// restored is every scenario's last step: after its own restore, the suite's release answers
// and the doctor finds the cluster healthy.
func restored(ns *string) func(context.Context, *testing.T, *envconf.Config) context.Context {
	return suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
		if err := release.WaitAdmission(ctx, c.Dynamic(), r, admissionTimeout); err != nil {
			expect.Errorf(t, "after the scenario's restore: %v", err)
			return ctx
		}
		expectDoctorHealthy(ctx, t, c, targetOf(r, *ns), healthyTimeout)
		return ctx
	})
}
