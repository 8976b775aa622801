package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gauntlet-dev/gauntlet/operator/internal/certs"
	"github.com/gauntlet-dev/gauntlet/operator/internal/namespacescope"
	"github.com/gauntlet-dev/gauntlet/operator/internal/version"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook"
)

// options are the operator's command-line settings; the Helm chart sets every one of them.
type options struct {
	metricsAddr   string
	metricsSecure bool
	probeAddr     string
	pprofAddr     string

	webhookPort    int
	certDir        string
	certMode       certs.Mode
	certSecret     string
	webhookService string
	validatingName string
	mutatingName   string
	conversionCRD  string
	caValidity     time.Duration
	serverValidity time.Duration
	certLookAhead  time.Duration
	certCheckEvery time.Duration
	caPropagation  time.Duration

	restrictNamespace string
	leases            namespacescope.Timings

	leaderElect      bool
	leaderElectionID string

	defaultDGDRImage  string
	latencyInjection  time.Duration
	webhookDrain      time.Duration
	operatorNamespace string
	podName           string

	zap zap.Options
}

// parseOptions reads flags from args; environment variables supply the pod's identity.
func parseOptions(fs *flag.FlagSet, args []string) (options, error) {
	var o options
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve /metrics over HTTPS to clients with a bearer token the API server authenticates and authorizes for get on the non-resource URL /metrics; false serves plain HTTP to anyone.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address serving net/http/pprof (/debug/pprof/) for profiling under load; empty or \"0\" disables it.")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port the webhook server listens on.")
	fs.StringVar(&o.certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory the webhook server reads its certificate from (tls.crt/tls.key, or OLM's tls.cert/tls.key).")
	certMode := fs.String("webhook-cert-mode", string(certs.ModeAutomatic), "Where serving certificates come from: automatic (built-in cert-controller), cert-manager, or external.")
	fs.StringVar(&o.certSecret, "webhook-cert-secret", "webhook-server-cert", "Name of the Secret (in the operator's namespace) holding tls.crt, tls.key and ca.crt.")
	fs.StringVar(&o.webhookService, "webhook-service", "", "Name of the webhook Service (in the operator's namespace); the certificate's SANs are derived from it.")
	fs.StringVar(&o.validatingName, "validating-webhook-configuration", "", "ValidatingWebhookConfiguration whose caBundle the automatic mode keeps in sync.")
	fs.StringVar(&o.mutatingName, "mutating-webhook-configuration", "", "MutatingWebhookConfiguration whose caBundle the automatic mode keeps in sync.")
	fs.StringVar(&o.conversionCRD, "conversion-crd", "", "CRD whose conversion webhook caBundle the automatic mode keeps in sync (empty: none).")
	fs.DurationVar(&o.caValidity, "cert-ca-validity", 10*365*24*time.Hour, "Validity of a generated root CA.")
	fs.DurationVar(&o.serverValidity, "cert-server-validity", 10*365*24*time.Hour, "Validity of a generated serving certificate.")
	fs.DurationVar(&o.certLookAhead, "cert-lookahead", 90*24*time.Hour, "Regenerate certificates that expire within this window.")
	fs.DurationVar(&o.certCheckEvery, "cert-check-interval", 30*time.Second, "How often the automatic mode re-checks the Secret and the injected caBundles.")
	fs.DurationVar(&o.caPropagation, "cert-ca-propagation", certs.DefaultCAPropagation, "Automatic mode: how long a new CA stays in every caBundle before a certificate it signed is stored or served (the API server's view of the bundles lags); 0: no wait.")
	fs.StringVar(&o.restrictNamespace, "restrict-to-namespace", "", "Run namespace-restricted in this namespace (holds the namespace lock Lease); empty runs cluster-wide.")
	o.leases = namespacescope.DefaultTimings()
	o.leases.BindFlags(fs)
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect one leader among the replicas (a Lease in the operator's namespace): only the leader runs the reconcilers and, in automatic certificate mode, generates certificates and injects caBundles; every replica serves the webhooks. false: this process does all of it (one replica only).")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "dynamo-operator-leader", "Name of the leader-election Lease in the operator's namespace (not the namespace lock Lease "+namespacescope.LeaseName+").")
	fs.StringVar(&o.defaultDGDRImage, "dgdr-default-image", "nvcr.io/nvidia/ai-dynamo/dynamo-frontend:"+version.Version, "Image the mutating webhook sets on DynamoGraphDeploymentRequests that name none.")
	fs.DurationVar(&o.webhookDrain, "webhook-drain-timeout", webhook.DefaultDrainTimeout, "On SIGTERM, keep serving webhooks, closing each connection after its response and asking each idle one to close (an interim 100 Continue), until no connection is left or this long; then reset the idle ones left (see docs/operator.md, \"Restarts without a failed admission\"). Above 90s (client-go's idle timeout) not even a client that ignores the request to close has a connection closed under a request; a namespace-restricted operator hands its namespace over before it drains, so both operators validate there meanwhile.")
	fs.DurationVar(&o.latencyInjection, "webhook-latency-injection", 0, "TEST ONLY: delay every validating and mutating webhook call by this much (troubleshooting scenario T9, a webhook slower than timeoutSeconds); 0 disables it. Never set it in production.")
	fs.StringVar(&o.operatorNamespace, "operator-namespace", os.Getenv("POD_NAMESPACE"), "Namespace the operator runs in (default $POD_NAMESPACE).")
	fs.StringVar(&o.podName, "pod-name", os.Getenv("POD_NAME"), "This pod's name, the Lease holder identity (default $POD_NAME).")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	mode, err := certs.ParseMode(*certMode)
	if err != nil {
		return o, fmt.Errorf("--webhook-cert-mode: %w", err)
	}
	o.certMode = mode
	return o, o.validate()
}

// webhookServiceName is the webhook Service, in the operator's namespace; empty Name when
// --webhook-service is not set.
func (o options) webhookServiceName() types.NamespacedName {
	if o.webhookService == "" {
		return types.NamespacedName{}
	}
	return types.NamespacedName{Namespace: o.operatorNamespace, Name: o.webhookService}
}

func (o options) validate() error {
	var errs []error
	if err := o.leases.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.operatorNamespace == "" {
		errs = append(errs, errors.New("--operator-namespace is empty: set it or the POD_NAMESPACE environment variable"))
	}
	if o.certMode == certs.ModeAutomatic && o.webhookService == "" {
		errs = append(errs, errors.New("--webhook-service is required with --webhook-cert-mode=automatic: the certificate's SANs name it"))
	}
	if o.leaderElect && (o.leaderElectionID == "" || o.leaderElectionID == namespacescope.LeaseName) {
		errs = append(errs, fmt.Errorf("--leader-election-id=%q: must name a Lease of its own (not empty, not the namespace lock %s)", o.leaderElectionID, namespacescope.LeaseName))
	}
	if o.restrictNamespace != "" && o.podName == "" {
		errs = append(errs, errors.New("--pod-name is empty: a namespace-restricted operator needs it (or $POD_NAME) as its Lease holder identity"))
	}
	if o.restrictNamespace != "" && o.webhookService == "" {
		errs = append(errs, errors.New("--webhook-service is required with --restrict-to-namespace: the operator takes its namespace's Lease only once the API server reaches its webhooks through that Service"))
	}
	if o.webhookDrain < 0 {
		errs = append(errs, fmt.Errorf("--webhook-drain-timeout=%s: must not be negative", o.webhookDrain))
	}
	if o.latencyInjection < 0 {
		errs = append(errs, fmt.Errorf("--webhook-latency-injection=%s: must not be negative", o.latencyInjection))
	}
	if o.webhookPort <= 0 || o.webhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port=%d: must be 1-65535", o.webhookPort))
	}
	return errors.Join(errs...)
}
