package chart

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
)

// Defaults of a Release, the names the chart's documentation uses.
const (
	DefaultReleaseName = "dynamo"
	DefaultNamespace   = "dynamo-system"
)

// ConversionCRD is the CRD whose conversion webhook the chart points at the release's Service.
const ConversionCRD = "dynamographdeploymentrequests.nvidia.com"

// OperatorAppLabel is the app.kubernetes.io/name label of the chart's operator pods.
const OperatorAppLabel = "dynamo-operator"

// CertMode is how a release gets its webhook serving certificate: one of the chart's three
// modes, or OLM, which is external mode with the certificate mounted under OLM's file names.
type CertMode string

// The certificate modes a Release can be installed in.
const (
	// Automatic: the operator generates, stores, rotates and injects its own CA and certificate.
	Automatic CertMode = "automatic"
	// CertManager: cert-manager issues the Secret (from the chart's own CA chain, or from the
	// Release's IssuerRef) and its cainjector fills the caBundles.
	CertManager CertMode = "cert-manager"
	// External: Install creates the Secret (kubernetes.io/tls: tls.crt, tls.key, ca.crt) from the
	// Release's ServingCertificate and passes its CA as webhook.caBundle.
	External CertMode = "external"
	// OLM: like External, but the Secret holds the pair under the file names OLM mounts
	// (tls.cert, tls.key), so the operator finds the certificate the way it would under OLM.
	OLM CertMode = "olm"
)

// IssuerRef names the cert-manager issuer that signs the serving certificate in CertManager mode.
type IssuerRef struct {
	// Kind is Issuer (in the release namespace) or ClusterIssuer.
	Kind string
	// Name of the issuer; empty means the chart's own self-signed CA chain.
	Name string
}

// Release is one installation of charts/dynamo-operator: where it goes, its certificate mode and
// any further chart values. Install fills in defaults; the names derived from it (Service,
// Secret, webhook configurations, Deployment) are the chart's, so scenarios never hard-code them.
type Release struct {
	// Name is the Helm release name (default DefaultReleaseName).
	Name string
	// Namespace is the release namespace, where the operator runs (default DefaultNamespace).
	Namespace string
	// Mode selects the certificate mode (default Automatic).
	Mode CertMode
	// IssuerRef is used in CertManager mode; the zero value means the chart's own CA chain.
	IssuerRef IssuerRef
	// Serving is the certificate served in External and OLM mode. When nil, Install generates a
	// CA and a certificate for the release's Service host and sets it here.
	Serving *pki.ServingCertificate
	// Values are further chart values (as in a values file), merged over those the mode sets;
	// for example {"webhook": {"failurePolicy": "Ignore"}}.
	Values map[string]any
}

// WithDefaults returns a copy with the defaults filled in.
func (r Release) WithDefaults() Release {
	if r.Name == "" {
		r.Name = DefaultReleaseName
	}
	if r.Namespace == "" {
		r.Namespace = DefaultNamespace
	}
	if r.Mode == "" {
		r.Mode = Automatic
	}
	return r
}

// ServiceName is the webhook Service: <release>-webhook-service.
func (r *Release) ServiceName() string { return r.name() + "-webhook-service" }

// ServiceHost is the name the API server dials the webhook by, and the SAN the serving
// certificate must carry: <svc>.<ns>.svc.
func (r *Release) ServiceHost() string { return r.ServiceName() + "." + r.namespace() + ".svc" }

// DeploymentName is the operator Deployment: <release>-operator.
func (r *Release) DeploymentName() string { return r.name() + "-operator" }

// LeaderElectionID is the operator's leader-election Lease in the release namespace
// (--leader-election-id): <release>-operator-leader.
func (r *Release) LeaderElectionID() string { return r.DeploymentName() + "-leader" }

// SecretName is the Secret holding the serving certificate, webhook.certificateSecret.name: the
// release's value, else the chart's default from its values.yaml. It panics when the chart
// cannot be read: every release is installed from it, so there is no name without it.
func (r *Release) SecretName() string {
	if name, ok := lookupString(r.Values, "webhook", "certificateSecret", "name"); ok && name != "" {
		return name
	}
	name, _ := mustChartDefault("webhook", "certificateSecret", "name").(string)
	return name
}

// OperatorImageRepository is the operator's image users get, image.repository of the chart's
// values.yaml: the image kind loads the operator as, and the process node maps to its binary.
// It panics when the chart cannot be read, as SecretName does.
func OperatorImageRepository() string {
	repo, _ := mustChartDefault("image", "repository").(string)
	return repo
}

// RestrictedNamespace is the namespace a namespace-restricted release serves, or "" for a
// cluster-wide release.
func (r *Release) RestrictedNamespace() string {
	if enabled, _ := lookupBool(r.Values, "namespaceRestriction", "enabled"); !enabled {
		return ""
	}
	if ns, ok := lookupString(r.Values, "namespaceRestriction", "namespace"); ok && ns != "" {
		return ns
	}
	return r.namespace()
}

// ValidatingName is the release's ValidatingWebhookConfiguration: <release>-validating, or
// <release>-validating-<namespace> for a namespace-restricted release.
func (r *Release) ValidatingName() string { return r.configName("validating") }

// MutatingName is the release's MutatingWebhookConfiguration (named like ValidatingName).
func (r *Release) MutatingName() string { return r.configName("mutating") }

// MetricsReaderName is the ClusterRole granting get on the operator's /metrics:
// <release>-metrics-reader, or <release>-metrics-reader-<namespace> for a namespace-restricted
// release.
func (r *Release) MetricsReaderName() string { return r.configName("metrics-reader") }

func (r *Release) configName(kind string) string {
	if ns := r.RestrictedNamespace(); ns != "" {
		return r.name() + "-" + kind + "-" + ns
	}
	return r.name() + "-" + kind
}

// InstallsCRDs reports whether this release renders the Dynamo CRDs, crds.install: the
// release's value, else the chart's default. It panics when the chart cannot be read (see
// SecretName).
func (r *Release) InstallsCRDs() bool {
	if v, ok := lookupBool(r.Values, "crds", "install"); ok {
		return v
	}
	install, _ := mustChartDefault("crds", "install").(bool)
	return install
}

// ServingCertificateName is the cert-manager Certificate of CertManager mode.
func (r *Release) ServingCertificateName() string { return r.name() + "-serving-cert" }

// WebhookNamespace is a namespace the release's webhooks are called for: its restricted
// namespace, or else the release namespace.
func (r *Release) WebhookNamespace() string {
	if ns := r.RestrictedNamespace(); ns != "" {
		return ns
	}
	return r.namespace()
}

// DefaultDGDRImage is the image the mutating webhook sets on DynamoGraphDeploymentRequests
// that name none: dgdr.defaultImage when the release sets it, else the operator's documented
// default for its version.
func (r *Release) DefaultDGDRImage(operatorVersion string) string {
	if img, ok := lookupString(r.Values, "dgdr", "defaultImage"); ok && img != "" {
		return img
	}
	return "nvcr.io/nvidia/ai-dynamo/dynamo-frontend:" + operatorVersion
}

// CertificateValidity is the lifetime automatic mode gives the CA and the serving certificate:
// webhook.certificateValidity.{ca,server}, the release's values, else the chart's defaults.
func (r *Release) CertificateValidity() (ca, server time.Duration, err error) {
	if ca, err = r.duration("webhook", "certificateValidity", "ca"); err != nil {
		return 0, 0, err
	}
	server, err = r.duration("webhook", "certificateValidity", "server")
	return ca, server, err
}

// CertificateLookAhead is webhook.certificateValidity.lookAhead, how long before a
// certificate's expiry automatic mode replaces it: the release's value, else the chart's default.
func (r *Release) CertificateLookAhead() (time.Duration, error) {
	return r.duration("webhook", "certificateValidity", "lookAhead")
}

// CheckInterval is webhook.checkInterval, how often automatic mode's cert-controller re-checks
// the Secret and every caBundle on its own (the operator's --cert-check-interval): the
// release's value, else the chart's default.
func (r *Release) CheckInterval() (time.Duration, error) {
	return r.duration("webhook", "checkInterval")
}

// CAPropagation is webhook.caPropagation, how long automatic mode keeps a new CA in every
// caBundle before it stores and serves a certificate it signed: the release's value, else the
// chart's default from its values.yaml.
func (r *Release) CAPropagation() (time.Duration, error) {
	return r.duration("webhook", "caPropagation")
}

// duration is the Go duration at path: the release's value, else the chart's values.yaml's.
func (r *Release) duration(path ...string) (time.Duration, error) {
	v, err := r.valueOrChartDefault(path...)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(fmt.Sprint(v))
	if err != nil {
		return 0, fmt.Errorf("%s: %s=%v: %w", r, strings.Join(path, "."), v, err)
	}
	return d, nil
}

// DrainTimeout is drainTimeoutSeconds, how long a stopping operator drains its webhook
// connections at most: the release's value, else the chart's default from its values.yaml.
func (r *Release) DrainTimeout() (time.Duration, error) {
	v, err := r.valueOrChartDefault("drainTimeoutSeconds")
	if err != nil {
		return 0, err
	}
	secs, err := strconv.ParseFloat(fmt.Sprint(v), 64)
	if err != nil {
		return 0, fmt.Errorf("%s: drainTimeoutSeconds=%v: not a number of seconds", r, v)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// LogLevel is logLevel, the operator's --zap-log-level: the release's value, else the chart's
// default from its values.yaml.
func (r *Release) LogLevel() (string, error) {
	v, err := r.valueOrChartDefault("logLevel")
	if err != nil {
		return "", err
	}
	return fmt.Sprint(v), nil
}

// valueOrChartDefault is the value at path: the release's, else the chart's values.yaml's.
func (r *Release) valueOrChartDefault(path ...string) (any, error) {
	if v, ok := lookup(r.Values, path...); ok {
		return v, nil
	}
	return chartDefault(path...)
}

// chartDefault is the value at path in the chart's values.yaml.
func chartDefault(path ...string) (any, error) {
	values, err := chartValues()
	if err != nil {
		return nil, err
	}
	v, ok := lookup(values, path...)
	if !ok {
		return nil, fmt.Errorf("chart %s: values.yaml sets no %s", Path, strings.Join(path, "."))
	}
	return v, nil
}

// mustChartDefault is chartDefault for the names and switches a release has once installed; it
// panics when the chart cannot be read or does not set path.
func mustChartDefault(path ...string) any {
	v, err := chartDefault(path...)
	if err != nil {
		panic(err)
	}
	return v
}

// chartValues are the chart's values.yaml, read once.
var chartValues = sync.OnceValues(func() (map[string]any, error) {
	ch, err := Load()
	if err != nil {
		return nil, err
	}
	return ch.Values, nil
})

func (r *Release) name() string      { return r.WithDefaults().Name }
func (r *Release) namespace() string { return r.WithDefaults().Namespace }

// String names the release the way errors and progress lines refer to it.
func (r *Release) String() string {
	d := r.WithDefaults()
	return fmt.Sprintf("release %s/%s (%s mode)", d.Namespace, d.Name, d.Mode)
}

// ChartValues are the values Install passes to Helm: the mode's settings with Values merged
// over them. External and OLM mode need Serving set (Install does that).
func (r *Release) ChartValues() (map[string]any, error) {
	d := r.WithDefaults()
	mode := map[string]any{}
	switch d.Mode {
	case Automatic:
	case CertManager:
		cm := map[string]any{"enabled": true}
		if d.IssuerRef.Name != "" {
			kind := d.IssuerRef.Kind
			if kind == "" {
				kind = "Issuer"
			}
			cm["issuerRef"] = map[string]any{"kind": kind, "name": d.IssuerRef.Name}
		}
		mode["webhook"] = map[string]any{"certManager": cm}
	case External, OLM:
		if d.Serving == nil {
			return nil, fmt.Errorf("%s: %s mode needs a serving certificate (Release.Serving)", r, d.Mode)
		}
		mode["webhook"] = map[string]any{
			"certificateSecret": map[string]any{"external": true},
			"caBundle":          d.Serving.CABundle(),
		}
	default:
		return nil, fmt.Errorf("%s: unknown certificate mode %q (want %s, %s, %s or %s)", r, d.Mode, Automatic, CertManager, External, OLM)
	}
	return MergeValues(mode, d.Values), nil
}

// MergeValues returns chart values base with over merged in recursively: maps are merged key
// by key, any other value of over (lists included) replaces base's. Neither argument is changed.
func MergeValues(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range over {
		if vm, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = MergeValues(bm, vm)
				continue
			}
			out[k] = MergeValues(nil, vm)
			continue
		}
		out[k] = v
	}
	return out
}

func lookup(values map[string]any, path ...string) (any, bool) {
	var cur any = values
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func lookupString(values map[string]any, path ...string) (string, bool) {
	v, ok := lookup(values, path...)
	s, isString := v.(string)
	return s, ok && isString
}

func lookupBool(values map[string]any, path ...string) (bool, bool) {
	v, ok := lookup(values, path...)
	b, isBool := v.(bool)
	return b, ok && isBool
}
