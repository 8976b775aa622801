package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// A served probe tells an operator whether the API server reaches its validating webhooks: it
// is a server-side dry-run create of a valid DynamoGraphDeployment labelled ProbeLabel, and
// every validating webhook of an operator that knows its Service (Config.Service) answers it
// with ProbeWarning(that Service). A namespace-restricted operator takes its namespace's Lease
// only once its own warning comes back (ServedProbe.Await): until then the API server may not
// reach it — its certificate or caBundle not yet in place, the Service's routing not yet
// following its pod — and the cluster-wide operator, which sees no Lease, keeps validating the
// namespace.

// ProbeLabel marks a served probe. Only a dry-run create carrying it is answered.
const ProbeLabel = "nvidia.com/dynamo-operator-probe"

// ProbeWarning is the warning with which an operator whose webhook Service is service answers
// a served probe.
func ProbeWarning(service types.NamespacedName) string {
	return fmt.Sprintf("served probe answered by the dynamo-operator webhooks behind Service %s", service)
}

// ProbeAnsweringValidator adds ProbeWarning(service) to next's warnings for a served probe
// (next still judges it). An empty service returns next unchanged: an operator that does not
// know its Service cannot say which it is.
func ProbeAnsweringValidator[T client.Object](service types.NamespacedName, next admission.Validator[T]) admission.Validator[T] {
	if service.Name == "" {
		return next
	}
	return probeAnsweringValidator[T]{warning: ProbeWarning(service), next: next}
}

type probeAnsweringValidator[T client.Object] struct {
	warning string
	next    admission.Validator[T]
}

func (p probeAnsweringValidator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	warnings, err := p.next.ValidateCreate(ctx, obj)
	if isServedProbe(ctx, obj) {
		warnings = append(warnings, p.warning)
	}
	return warnings, err
}

func (p probeAnsweringValidator[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	return p.next.ValidateUpdate(ctx, oldObj, newObj)
}

func (p probeAnsweringValidator[T]) ValidateDelete(ctx context.Context, obj T) (admission.Warnings, error) {
	return p.next.ValidateDelete(ctx, obj)
}

// isServedProbe reports whether obj, being created, is a served probe: labelled ProbeLabel
// and sent as a dry run, so that answering it never concerns an object that is stored.
func isServedProbe(ctx context.Context, obj client.Object) bool {
	if _, ok := obj.GetLabels()[ProbeLabel]; !ok {
		return false
	}
	req, err := admission.RequestFromContext(ctx)
	return err == nil && req.DryRun != nil && *req.DryRun
}

// ServedProbe sends served probes into one namespace through the API server and looks for one
// operator's answer.
type ServedProbe struct {
	resource  dynamic.ResourceInterface
	namespace string
	service   types.NamespacedName
	log       logr.Logger
}

// NewServedProbe probes namespace for the answer of the operator whose webhook Service is
// service. The operator's credentials need create on dynamographdeployments there (the
// probe is a dry run: nothing is stored).
func NewServedProbe(cfg *rest.Config, namespace string, service types.NamespacedName, log logr.Logger) (*ServedProbe, error) {
	if namespace == "" || service.Name == "" || service.Namespace == "" {
		return nil, fmt.Errorf("served probe: the namespace (%q) and the webhook Service (%q) must both be given", namespace, service)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = warningsInContext{}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("served probe: building a client: %w", err)
	}
	gvr := v1alpha1.GroupVersion.WithResource("dynamographdeployments")
	return &ServedProbe{resource: dc.Resource(gvr).Namespace(namespace), namespace: namespace, service: service, log: log}, nil
}

// Answered sends one probe and reports whether the operator answered it; seen says what came
// back instead (for the log and for errors).
func (p *ServedProbe) Answered(ctx context.Context) (answered bool, seen string) {
	got := &warningSet{}
	_, err := p.resource.Create(withWarnings(ctx, got), p.object(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	want := ProbeWarning(p.service)
	warnings := got.list()
	if slices.Contains(warnings, want) {
		return true, ""
	}
	switch {
	case apierrors.IsForbidden(err):
		return false, fmt.Sprintf("the dry-run create was forbidden (%v): the operator's Role in namespace %s must allow create on dynamographdeployments.nvidia.com, as the chart's does", err, p.namespace)
	case err != nil:
		return false, fmt.Sprintf("the dry-run create failed: %v", err)
	case len(warnings) == 0:
		return false, "admitted without any warning"
	default:
		return false, fmt.Sprintf("admitted with other warnings: %q", strings.Join(warnings, "; "))
	}
}

// Await probes every interval until the operator answers, and returns nil then, or ctx's error.
// It logs what it saw after the first probe and then every 10 s.
func (p *ServedProbe) Await(ctx context.Context, interval time.Duration) error {
	const logEvery = 10 * time.Second
	start := time.Now()
	var lastLog time.Time
	for attempt := 1; ; attempt++ {
		answered, seen := p.Answered(ctx)
		if answered {
			p.log.Info("the API server reaches this operator's webhooks through its Service",
				"namespace", p.namespace, "service", p.service.String(), "probes", attempt, "waited", time.Since(start).Round(time.Millisecond).String())
			return nil
		}
		if time.Since(lastLog) >= logEvery {
			lastLog = time.Now()
			p.log.Info("waiting for the API server to reach this operator's webhooks through its Service before taking the namespace's Lease",
				"namespace", p.namespace, "service", p.service.String(), "probes", attempt, "waited", time.Since(start).Round(time.Millisecond).String(), "lastAnswer", seen)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the API server to reach the webhooks behind Service %s (a served probe in namespace %s; last answer: %s): %w",
				p.service, p.namespace, seen, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// object is a valid DynamoGraphDeployment labelled as a probe, named by the API server.
func (p *ServedProbe) object() *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"backendFramework": "vllm",
			"services":         map[string]any{"probe": map[string]any{}},
		},
	}}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind("DynamoGraphDeployment")
	u.SetNamespace(p.namespace)
	u.SetGenerateName("dynamo-operator-probe-")
	u.SetLabels(map[string]string{ProbeLabel: "served"})
	return u
}

// warningSet collects the warnings of one request.
type warningSet struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningSet) add(text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningSet) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.warnings)
}

type warningSetKey struct{}

func withWarnings(ctx context.Context, w *warningSet) context.Context {
	return context.WithValue(ctx, warningSetKey{}, w)
}

// warningsInContext hands each response's warnings to the warningSet of its request's context.
type warningsInContext struct{}

func (warningsInContext) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if w, ok := ctx.Value(warningSetKey{}).(*warningSet); ok && code == 299 {
		w.add(text)
	}
}

var _ rest.WarningHandlerWithContext = warningsInContext{}
