// Package webhook registers the operator's admission and conversion webhooks on the manager's
// webhook server. The rules live in the validation and defaulting subpackages; this package
// composes each of them once with the cross-cutting decorators LeaseAware (skip namespaces a
// namespace-restricted operator owns) and Observed (logs and metrics), plus — test-only, off
// unless Config.LatencyInjection is set — LatencyInjected.
//
// The +kubebuilder:webhook markers below are the single list of webhooks: controller-gen
// turns them into charts/dynamo-operator/files/webhook/manifests.yaml, which the chart renders
// (overriding names, clientConfig, failurePolicy and namespaceSelector).
package webhook

import (
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/logging"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook/defaulting"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook/validation"
)

// +kubebuilder:webhook:path=/validate-nvidia-com-v1alpha1-dynamocomponentdeployment,mutating=false,failurePolicy=fail,sideEffects=None,groups=nvidia.com,resources=dynamocomponentdeployments,verbs=create;update,versions=v1alpha1,name=vdynamocomponentdeployment.nvidia.com,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-nvidia-com-v1alpha1-dynamographdeployment,mutating=false,failurePolicy=fail,sideEffects=None,groups=nvidia.com,resources=dynamographdeployments,verbs=create;update,versions=v1alpha1,name=vdynamographdeployment.nvidia.com,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-nvidia-com-v1alpha1-dynamomodel,mutating=false,failurePolicy=fail,sideEffects=None,groups=nvidia.com,resources=dynamomodels,verbs=create;update,versions=v1alpha1,name=vdynamomodel.nvidia.com,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-nvidia-com-v1beta1-dynamographdeploymentrequest,mutating=false,failurePolicy=fail,sideEffects=None,groups=nvidia.com,resources=dynamographdeploymentrequests,verbs=create;update,versions=v1beta1,name=vdynamographdeploymentrequest.nvidia.com,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/mutate-nvidia-com-v1alpha1-dynamographdeployment,mutating=true,failurePolicy=fail,sideEffects=None,groups=nvidia.com,resources=dynamographdeployments,verbs=create;update,versions=v1alpha1,name=mdynamographdeployment.nvidia.com,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/mutate-nvidia-com-v1beta1-dynamographdeploymentrequest,mutating=true,failurePolicy=fail,sideEffects=None,groups=nvidia.com,resources=dynamographdeploymentrequests,verbs=create;update,versions=v1beta1,name=mdynamographdeploymentrequest.nvidia.com,admissionReviewVersions=v1,matchPolicy=Equivalent

// ExclusionChecker reports namespaces this operator must not admit for, because a
// namespace-restricted operator's Lease is active there. The cluster-wide lease watcher
// implements it.
type ExclusionChecker interface {
	Excluded(namespace string) bool
}

// Config is what Register needs besides the manager.
type Config struct {
	// Exclusions lists namespaces to skip; nil excludes nothing (a namespace-restricted
	// operator, or no other operator around).
	Exclusions ExclusionChecker
	// OperatorVersion is stamped on new DynamoGraphDeployments.
	OperatorVersion string
	// DefaultDGDRImage is the profiler image a DynamoGraphDeploymentRequest gets when it
	// names none; empty leaves requests as they are.
	DefaultDGDRImage string
	// LatencyInjection delays every validating and mutating call by this much. Test-only
	// (troubleshooting scenario T9: a webhook slower than timeoutSeconds); 0 is off.
	LatencyInjection time.Duration
	// Service is the operator's webhook Service; every validating webhook answers a served
	// probe (ProbeLabel) with ProbeWarning(Service). Empty answers none.
	Service types.NamespacedName
	// BodyReadTimeout bounds the wait for a request's body (Guarded); 0 is
	// DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
}

// ConversionPath is where the conversion webhook is served (controller-runtime's fixed path).
const ConversionPath = "/convert"

// Register adds every validating, mutating and conversion webhook to mgr's webhook server.
// Call it before the manager starts.
func Register(mgr ctrl.Manager, cfg Config) error {
	log := mgr.GetLogger().WithName("webhook")
	// Every path, including those controller-runtime's builder registers, is served through
	// Guarded: POST of application/json only, the body read within the body timeout.
	bodyTimeout := cfg.BodyReadTimeout
	if bodyTimeout <= 0 {
		bodyTimeout = DefaultBodyReadTimeout
	}
	mgr = withGuardedServer(mgr, log, bodyTimeout)
	if cfg.LatencyInjection > 0 {
		log.Info("TEST ONLY: delaying every validating and mutating webhook call", "latencyInjection", cfg.LatencyInjection.String())
	}

	// controller-runtime's conversion handler decodes the whole body, however large; serve it
	// behind the admission paths' size limit. It goes first: the builder registers its own,
	// unbounded /convert with the first convertible kind (the DGDR validator below) unless the
	// path is taken. ConversionReviews refuses, with a message, what is not a v1
	// ConversionReview with a request (controller-runtime answers those with a bare 400, or
	// converts them as an empty request).
	mgr.GetWebhookServer().Register(ConversionPath, BoundedBody(MaxRequestBytes, log,
		ConversionReviews(log, conversion.NewWebhookHandler(mgr.GetScheme(), mgr.GetConverterRegistry()))))

	log.Info("Registering validation webhooks",
		"kinds", []string{"DynamoComponentDeployment", "DynamoGraphDeployment", "DynamoModel", "DynamoGraphDeploymentRequest"})
	if err := registerValidator(mgr, cfg, log, &v1alpha1.DynamoComponentDeployment{}, validation.ComponentDeployment()); err != nil {
		return err
	}
	if err := registerValidator(mgr, cfg, log, &v1alpha1.DynamoGraphDeployment{}, validation.GraphDeployment()); err != nil {
		return err
	}
	if err := registerValidator(mgr, cfg, log, &v1alpha1.DynamoModel{}, validation.Model()); err != nil {
		return err
	}
	if err := registerValidator(mgr, cfg, log, &v1beta1.DynamoGraphDeploymentRequest{}, validation.GraphDeploymentRequest()); err != nil {
		return err
	}

	log.Info("Registering mutating webhooks", "kinds", []string{"DynamoGraphDeployment", "DynamoGraphDeploymentRequest"})
	if err := registerPatcher(mgr, cfg, log, &v1alpha1.DynamoGraphDeployment{},
		defaulting.GraphDeployment{OperatorVersion: cfg.OperatorVersion}); err != nil {
		return err
	}
	if err := registerPatcher(mgr, cfg, log, &v1beta1.DynamoGraphDeploymentRequest{},
		defaulting.GraphDeploymentRequest{Image: cfg.DefaultDGDRImage}); err != nil {
		return err
	}

	log.Info("Registering conversion webhook", "kind", "DynamoGraphDeploymentRequest", "hub", v1beta1.GroupVersion.Version,
		"spokes", []string{v1alpha1.GroupVersion.Version}, "path", ConversionPath)
	hub := &v1beta1.DynamoGraphDeploymentRequest{}
	// The builder silently skips types that are not convertible; a DGDR that lost its
	// ConvertTo/ConvertFrom must fail loudly instead.
	ok, err := conversion.IsConvertible(mgr.GetScheme(), hub)
	if err != nil {
		return fmt.Errorf("registering the conversion webhook for DynamoGraphDeploymentRequest: %w", err)
	}
	if !ok {
		return fmt.Errorf("registering the conversion webhook for DynamoGraphDeploymentRequest: the scheme has no v1alpha1 version that converts to the v1beta1 hub")
	}
	if err := ctrl.NewWebhookManagedBy(mgr, hub).Complete(); err != nil {
		return fmt.Errorf("registering the conversion webhook for DynamoGraphDeploymentRequest: %w", err)
	}
	return nil
}

// registerValidator serves v for obj's kind, wrapped as
// Observed(LatencyInjected(ProbeAnswering(LeaseAware(v)))): Observed is outermost so it records
// what the apiserver got, injected latency included; a served probe is answered even where a
// restricted operator's Lease makes this one skip the namespace.
func registerValidator[T client.Object](mgr ctrl.Manager, cfg Config, log logr.Logger, obj T, v admission.Validator[T]) error {
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("registering a validating webhook for %T: %w", obj, err)
	}
	wrapped := ObservedValidator(webhookName("validate", gvk.Kind), gvk.Kind, log,
		LatencyInjectedValidator(cfg.LatencyInjection, ProbeAnsweringValidator(cfg.Service, LeaseAwareValidator(cfg.Exclusions, log, v))))
	if err := ctrl.NewWebhookManagedBy(mgr, obj).WithValidator(wrapped).WithLogConstructor(requestLogger(gvk)).Complete(); err != nil {
		return fmt.Errorf("registering the validating webhook for %s: %w", gvk.Kind, err)
	}
	return nil
}

// registerPatcher serves p for obj's kind, wrapped as Observed(LatencyInjected(LeaseAware(p))),
// at the path controller-runtime's builder would give the kind's mutating webhook (the path
// the markers above name); the builder itself takes only controller-runtime's Defaulters.
func registerPatcher[T client.Object](mgr ctrl.Manager, cfg Config, log logr.Logger, obj T, p Patcher[T]) error {
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("registering a mutating webhook for %T: %w", obj, err)
	}
	wrapped := ObservedPatcher(webhookName("mutate", gvk.Kind), gvk.Kind, log,
		LatencyInjectedPatcher(cfg.LatencyInjection, LeaseAwarePatcher(cfg.Exclusions, log, p)))
	mgr.GetWebhookServer().Register(mutatePath(gvk), &admission.Webhook{
		Handler:        newPatching(mgr.GetScheme(), obj, wrapped),
		LogConstructor: requestLogger(gvk),
	})
	return nil
}

// mutatePath is where controller-runtime's builder serves a kind's mutating webhook, as the
// markers above name it: /mutate-<group, dots as dashes>-<version>-<kind in lower case>.
func mutatePath(gvk schema.GroupVersionKind) string {
	return "/mutate-" + strings.ReplaceAll(gvk.Group, ".", "-") + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
}

// requestLogger is the LogConstructor of the admission webhooks: the logger controller-runtime
// builds for every request, with the values its builder gives it, deferred (logging.DeferValues)
// until something is written to it, at V(5) or on a failure, which is rare. Built eagerly, as the
// builder's default does, it cost more per request than the rules themselves.
func requestLogger(gvk schema.GroupVersionKind) func(logr.Logger, *admission.Request) logr.Logger {
	return func(base logr.Logger, req *admission.Request) logr.Logger {
		log := logging.DeferValues(base)
		if req == nil {
			return log.WithValues("webhookGroup", gvk.Group, "webhookKind", gvk.Kind)
		}
		return log.WithValues("webhookGroup", gvk.Group, "webhookKind", gvk.Kind,
			gvk.Kind, klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name,
			"resource", req.Resource, "user", req.UserInfo.Username, "requestID", req.UID)
	}
}

// webhookName is the "webhook" label of the webhook metrics, e.g. validate-dynamomodel.
func webhookName(action, kind string) string {
	return action + "-" + strings.ToLower(kind)
}
