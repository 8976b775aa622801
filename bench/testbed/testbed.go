// Package testbed brings up the operator the benchmarks attack — on a local
// cluster with the chart installed (StartLocal, what `make bench` measures), or
// against envtest with the operator as a subprocess (StartEnvtest, the
// seconds-long smoke run) — and says how to reach it directly and through the
// API server.
//
// Both install the chart in automatic certificate mode with one addition: the
// webhooks' namespaceSelector skips namespaces labelled ControlLabel. The
// control namespace is such a namespace, so a dry-run create of the very same
// DynamoGraphDeployment there goes through the same API server path (CRD
// schema and CEL validation, defaulting, serialization, dry-run storage) minus
// exactly the webhook calls. That is the cleanest control available: a
// different resource (a ConfigMap, say) would also differ in decoding,
// validation and storage, and every Dynamo CRD has a webhook.
package testbed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/strvals"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/metrics"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// ControlLabel marks namespaces the bench's webhooks skip (namespaceSelector
// DoesNotExist on this key).
const ControlLabel = "bench.gauntlet.dev/control"

// SideLabel labels the namespace each release of an A/B testbed serves
// (StartLocalAB): release A's webhooks select the namespace labelled "a",
// release B's the one labelled "b", and neither selects the control or floor
// namespace.
const SideLabel = "bench.gauntlet.dev/side"

// Namespaces the dry-run creates go to.
const (
	WebhookNamespace = "bench"
	ControlNamespace = "bench-control"
)

// OperatorVersion is the version the benchmarked operator is built with; the
// mutating webhook stamps it on every DynamoGraphDeployment.
const OperatorVersion = "v0.0.0-bench"

// Testbed is a running operator with its webhooks installed.
type Testbed struct {
	// Provider says where it runs: "local" or "envtest".
	Provider string
	// KubernetesVersion is the API server's version.
	KubernetesVersion string
	// REST reaches the API server as a cluster admin.
	REST *rest.Config
	// Release is the chart release serving the webhooks.
	Release chart.Release
	// WebhookURL is the operator's webhook server (scheme, host, port), for
	// direct attacks that bypass the API server.
	WebhookURL string
	// WebhookTLS trusts the webhook's CA and expects its Service name, as the
	// API server does.
	WebhookTLS *tls.Config
	// OperatorMetricsURL is the operator's Prometheus endpoint (HTTPS).
	OperatorMetricsURL string
	// OperatorMetricsClient reaches OperatorMetricsURL as a user's Prometheus does: with the
	// bearer token of a ServiceAccount bound to the release's metrics-reader ClusterRole.
	OperatorMetricsClient *http.Client
	// OperatorPprofURL is the operator's net/http/pprof base (".../debug/pprof/"),
	// empty unless profiling was asked for.
	OperatorPprofURL string
	// WebhookNamespace is where dry-run creates pass the webhooks;
	// ControlNamespace is where they skip them.
	WebhookNamespace, ControlNamespace string
	// FloorNamespace is where dry-run creates pass only the floor webhook
	// (InstallFloor); empty when the testbed has none (envtest).
	FloorNamespace string
	// FloorPatchingNamespace is where they pass only the patching floor's
	// webhooks (InstallFloor); empty when the testbed has none (envtest, a
	// target's).
	FloorPatchingNamespace string
	// FloorDirectNamespace is where they pass only the floor's webhooks
	// called at its pod's address (url:), bypassing the Service
	// (InstallFloor); empty when the testbed has none.
	FloorDirectNamespace string

	// Object is, on a target's testbed (StartTargetAB), what its dry-run creates create: the
	// target's probe object. nil on the reference operator's, which creates DynamoGraphDeployments.
	Object *TargetObject

	// side is "a" or "b" on an A/B testbed, empty otherwise.
	side string

	closers []func(context.Context) error
	// secretsDir holds what must not land in the run's output: the admin
	// kubeconfig and the operator's serving key (envtest); Close removes it.
	secretsDir string
}

// Close tears down what the testbed started, last started first.
func (t *Testbed) Close(ctx context.Context) error {
	var errs []error
	for i := len(t.closers) - 1; i >= 0; i-- {
		errs = append(errs, t.closers[i](ctx))
	}
	t.closers = nil
	return errors.Join(errs...)
}

func (t *Testbed) onClose(f func(context.Context) error) { t.closers = append(t.closers, f) }

// APIServerClient is an HTTP client carrying the admin credentials, with
// client-go's transport (HTTP/2, like kubectl) and no client-side rate limit.
func (t *Testbed) APIServerClient() (*http.Client, error) {
	c, err := rest.HTTPClientFor(t.REST)
	if err != nil {
		return nil, fmt.Errorf("building an HTTP client for the API server %s: %w", t.REST.Host, err)
	}
	return c, nil
}

// ParseValues turns Helm --set expressions ("webhook.timeoutSeconds=5",
// comma-separated or repeated) into chart values, with Helm's own parser so
// they mean what they mean to `helm install --set`.
func ParseValues(sets []string) (map[string]any, error) {
	vals := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			return nil, fmt.Errorf("parsing chart value %q: %w", s, err)
		}
	}
	return vals, nil
}

// benchValues are the chart values of a bench release: the control
// namespaces' exclusion, then the caller's values over them.
func benchValues(extra map[string]any) map[string]any {
	vals := map[string]any{
		"webhook": map[string]any{
			"namespaceSelector": map[string]any{
				"matchExpressions": []any{map[string]any{"key": ControlLabel, "operator": "DoesNotExist"}},
			},
		},
	}
	return chart.MergeValues(vals, extra)
}

// sideValues are the chart values of side ("a" or "b") of an A/B testbed:
// its webhooks select only the namespace labelled SideLabel=side, then the
// caller's values over them.
func sideValues(side string, extra map[string]any) map[string]any {
	vals := map[string]any{
		"webhook": map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{SideLabel: side}},
		},
	}
	return chart.MergeValues(vals, extra)
}

// finish does what both providers need once the operator serves: the bench
// namespaces, proof that the webhook namespace passes the webhooks and the
// control namespace skips them, the webhook's CA for direct attacks, and the
// API server's version.
func (t *Testbed) finish(ctx context.Context, logf func(string, ...any)) error {
	kube, err := kubernetes.NewForConfig(t.REST)
	if err != nil {
		return fmt.Errorf("building a Kubernetes client for %s: %w", t.REST.Host, err)
	}
	dyn, err := dynamic.NewForConfig(t.REST)
	if err != nil {
		return fmt.Errorf("building a dynamic client for %s: %w", t.REST.Host, err)
	}
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the API server version: %w", err)
	}
	t.KubernetesVersion = v.GitVersion

	t.WebhookNamespace, t.ControlNamespace = WebhookNamespace, ControlNamespace
	var sideLabels map[string]string
	if t.side != "" {
		t.WebhookNamespace = WebhookNamespace + "-" + t.side
		sideLabels = map[string]string{SideLabel: t.side}
	}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: t.WebhookNamespace, Labels: sideLabels}},
		{ObjectMeta: metav1.ObjectMeta{Name: t.ControlNamespace, Labels: map[string]string{ControlLabel: "true"}}},
	} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Namespace %s: %w", ns.Name, err)
		}
	}
	start := time.Now()
	if err := waitRouting(ctx, dyn, t.WebhookNamespace, t.ControlNamespace); err != nil {
		return err
	}
	logf("webhooks answer in namespace %s and are skipped in %s (%.1fs)", t.WebhookNamespace, t.ControlNamespace, time.Since(start).Seconds())

	r := &t.Release
	secret, err := kube.CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the webhook CA from Secret %s/%s: %w", r.Namespace, r.SecretName(), err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		return fmt.Errorf("ca.crt of Secret %s/%s holds no PEM certificate", r.Namespace, r.SecretName())
	}
	t.OperatorMetricsClient = metrics.NewReader(kube, r).Client(nil)
	t.WebhookTLS = &tls.Config{
		RootCAs:    pool,
		ServerName: r.ServiceHost(),
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
	}
	return nil
}

// waitRouting waits until a dry-run create in the webhook namespace comes back
// stamped by the mutating webhook and an invalid one in the control namespace
// is admitted unstamped (neither webhook called). The API server learns about
// a new namespace's labels through its informer, so the first answers may
// still route the old way.
func waitRouting(ctx context.Context, dyn dynamic.Interface, webhookNS, controlNS string) error {
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	what := fmt.Sprintf("dry-run DynamoGraphDeployments to be stamped by the webhooks in namespace %s and to skip them in %s", webhookNS, controlNS)
	return poll.Until(ctx, what, time.Minute, func(ctx context.Context) (bool, string, error) {
		name := "bench-probe-" + rand.String(5)
		got, err := dyn.Resource(dynamo.GraphDeployments).Namespace(webhookNS).Create(ctx, dynamo.GraphDeployment(webhookNS, name), dry)
		if err != nil {
			return false, webhookNS + ": " + err.Error(), nil
		}
		if _, ok := got.GetAnnotations()[dynamo.OriginVersionAnnotation]; !ok {
			return false, webhookNS + ": the DynamoGraphDeployment came back without " + dynamo.OriginVersionAnnotation, nil
		}
		got, err = dyn.Resource(dynamo.GraphDeployments).Namespace(controlNS).Create(ctx, dynamo.InvalidGraphDeployment(controlNS, name), dry)
		if err != nil {
			return false, controlNS + ": " + err.Error(), nil
		}
		if _, ok := got.GetAnnotations()[dynamo.OriginVersionAnnotation]; ok {
			return false, controlNS + ": the DynamoGraphDeployment came back stamped by the mutating webhook", nil
		}
		return true, "", nil
	})
}

// logfTo prints progress lines to w (nothing when w is nil), best effort: a failed write to the
// terminal must not fail the test bed.
func logfTo(w io.Writer) func(string, ...any) {
	return func(format string, args ...any) {
		if w != nil {
			_, _ = fmt.Fprintf(w, "• "+strings.TrimSuffix(format, "\n")+"\n", args...)
		}
	}
}
