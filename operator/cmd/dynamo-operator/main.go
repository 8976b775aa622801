// Command dynamo-operator is the Dynamo operator: admission webhooks (validating, mutating,
// conversion) on one TLS server, certificates in three modes, lease-based coordination between
// a cluster-wide operator and namespace-restricted ones, and finalizer/status reconcilers.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gauntlet-dev/gauntlet/operator/internal/certs"
	"github.com/gauntlet-dev/gauntlet/operator/internal/controller"
	"github.com/gauntlet-dev/gauntlet/operator/internal/logging"
	"github.com/gauntlet-dev/gauntlet/operator/internal/namespacescope"
	"github.com/gauntlet-dev/gauntlet/operator/internal/scheme"
	"github.com/gauntlet-dev/gauntlet/operator/internal/version"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook"
)

var setupLog = ctrl.Log.WithName("setup")

// servedProbeInterval is how often a namespace-restricted operator sends a served probe while
// it waits to take its namespace's Lease: the longest the two operators both validate the
// namespace on its account, beyond the Lease's way to the cluster-wide operator.
const servedProbeInterval = 200 * time.Millisecond

func main() {
	// controller-runtime registers --kubeconfig on the global flag set; parse that set so the
	// flag keeps working, with our flags added to it.
	opts, err := parseOptions(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dynamo-operator:", err)
		os.Exit(2)
	}
	installLogger(opts, os.Stderr)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		setupLog.Error(err, "loading kubeconfig")
		os.Exit(1)
	}
	ctx, forced := shutdownSignals()
	if err := run(ctx, forced, cfg, opts); err != nil {
		setupLog.Error(err, "operator exiting")
		os.Exit(1)
	}
}

// installLogger makes the operator's logger (JSON lines on w, configured by the --zap-* flags)
// the one log stream of the process: controller-runtime, klog and net/http's error logs
// included.
func installLogger(opts options, w io.Writer) {
	logging.Install(logging.New(opts.zap, w))
}

// run starts the operator and returns when ctx ends and the manager has stopped, when forced is
// closed (a second signal: at once), or when something fails. Every return path of a
// namespace-restricted operator releases its lock Lease first (deferred), so a cluster-wide
// operator takes the namespace over at once instead of after the Lease expires; exits.go keeps
// the ways out that would skip it (a second signal, a runnable's panic) coming through here.
func run(ctx context.Context, forced <-chan struct{}, cfg *rest.Config, opts options) (err error) {
	setupLog.Info("starting dynamo-operator", "version", version.Version, "certMode", opts.certMode,
		"namespace", opts.operatorNamespace, "restrictedTo", opts.restrictNamespace)
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building Kubernetes client: %w", err)
	}

	// A restricted operator serves first and takes its namespace's Lease only once the API
	// server reaches its webhooks through its Service (webhook.ServedProbe). Until then the
	// cluster-wide operator, seeing no Lease, keeps validating the namespace, so no admission
	// there is ever validated by nobody; for a moment both operators validate it
	// (docs/operator.md, "Hand-over windows").
	var holder *namespacescope.Holder
	if opts.restrictNamespace != "" {
		probe, err := webhook.NewServedProbe(cfg, opts.restrictNamespace, opts.webhookServiceName(), ctrl.Log.WithName("served-probe"))
		if err != nil {
			return err
		}
		holder, err = namespacescope.NewHolder(clientset.CoordinationV1(), opts.restrictNamespace, opts.podName, opts.leases,
			namespacescope.WithLogger(ctrl.Log.WithName("lease-holder")),
			namespacescope.WithAcquireAfter(func(ctx context.Context) error { return probe.Await(ctx, servedProbeInterval) }))
		if err != nil {
			return err
		}
		// Every way out deletes the Lease if this pod holds it — also after a create whose
		// answer was lost (a timeout, a dropped connection, SIGTERM cancelling the request),
		// which may have stored it all the same.
		defer func() {
			if relErr := holder.Release(context.WithoutCancel(ctx)); relErr != nil {
				err = errors.Join(err, relErr)
			}
		}()
	}

	certController, err := certs.New(cfg, opts.certOptions(), ctrl.Log.WithName("cert-controller"))
	if err != nil {
		return err
	}
	setupLog.Info("waiting for the webhook serving certificate", "mode", opts.certMode, "dir", opts.certDir)
	if err := certController.Bootstrap(ctx); err != nil {
		return fmt.Errorf("preparing the webhook serving certificate: %w", err)
	}

	mgr, err := ctrl.NewManager(cfg, managerOptions(opts, certController))
	if err != nil {
		return fmt.Errorf("creating the controller manager: %w", err)
	}
	if err := addPanicSafe(mgr, "certificate controller", certController); err != nil {
		return err
	}
	// The leader's part: generating certificates and injecting caBundles (automatic mode).
	if err := addPanicSafe(mgr, "certificate controller's leader part", certController.Leader()); err != nil {
		return err
	}
	readyChecks := map[string]healthz.Checker{"serving-certificate": certController.ReadyCheck}

	var exclusions webhook.ExclusionChecker
	if holder != nil {
		if err := addPanicSafe(mgr, "namespace lock holder", holder); err != nil {
			return err
		}
	} else {
		watcher, err := namespacescope.NewWatcher(clientset, opts.leases, namespacescope.WithLogger(ctrl.Log.WithName("lease-watcher")))
		if err != nil {
			return err
		}
		if err := addPanicSafe(mgr, "lease watcher", watcher); err != nil {
			return err
		}
		readyChecks["lease-watcher"] = watcher.ReadyCheck
		exclusions = watcher
	}

	if err := webhook.Register(mgr, webhook.Config{
		Exclusions:       exclusions,
		Service:          opts.webhookServiceName(),
		OperatorVersion:  version.Version,
		DefaultDGDRImage: opts.defaultDGDRImage,
		LatencyInjection: opts.latencyInjection,
	}); err != nil {
		return err
	}
	if err := (&controller.DynamoGraphDeploymentReconciler{Client: mgr.GetClient(), Exclusions: exclusions}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the DynamoGraphDeployment controller: %w", err)
	}
	if err := (&controller.DynamoGraphDeploymentRequestReconciler{Client: mgr.GetClient(), Exclusions: exclusions}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the DynamoGraphDeploymentRequest controller: %w", err)
	}

	readyChecks["webhook-server"] = mgr.GetWebhookServer().StartedChecker()
	// The probes are served by the operator's own server (probes.go), which bounds how long a
	// request may take to arrive; the manager's is off.
	if err := addProbeServer(mgr, opts.probeAddr, map[string]healthz.Checker{"ping": healthz.Ping}, readyChecks); err != nil {
		return err
	}

	setupLog.Info("starting manager")
	return startManager(ctx, forced, mgr)
}

// managerOptions wires the webhook server (serverTLS, certificates from the certificate
// controller, started once a certificate is loaded), metrics (HTTPS with authentication and
// authorization unless --metrics-secure=false), probes, leader election and — for a
// restricted operator — a cache limited to its namespace.
func managerOptions(opts options, certController *certs.Controller) ctrl.Options {
	o := ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsOptions(opts),
		HealthProbeBindAddress: "0", // addProbeServer serves --health-probe-bind-address
		PprofBindAddress:       opts.pprofAddr,
		// A stopping server drains (webhook.Server): the API server's kept-alive connections
		// are closed after a response or by the API server, never under a request it sends.
		WebhookServer: certController.GateWebhookServer(webhook.NewServer(ctrlwebhook.Options{
			Port:    opts.webhookPort,
			TLSOpts: []func(*tls.Config){serverTLS, certController.TLSConfig},
		}, opts.webhookDrain, ctrl.Log.WithName("webhook-server"))),
		// One leader runs the reconcilers and the certificate controller's leader part; every
		// replica serves the webhooks. A stopping leader releases the Lease, so a rollout's new
		// pod takes over at once instead of after the Lease expires.
		LeaderElection:                opts.leaderElect,
		LeaderElectionID:              opts.leaderElectionID,
		LeaderElectionNamespace:       opts.operatorNamespace,
		LeaderElectionReleaseOnCancel: true,
	}
	if opts.restrictNamespace != "" {
		o.Cache = namespacescope.CacheOptions(opts.restrictNamespace)
	}
	return o
}

// tls12CipherSuites are the TLS 1.2 suites the servers accept: ECDHE key exchange with an AEAD
// cipher, no CBC/SHA-1 and no static-RSA key exchange. TLS 1.3's suites are not configurable
// (all AEAD) and stay as Go has them.
var tls12CipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// serverTLS is the TLS policy of the webhook and metrics servers: TLS ≥ 1.2 with
// tls12CipherSuites, and HTTP/1.1 only — HTTP/2's rapid-reset and stream-cancellation CVEs make
// it a liability for an endpoint the API server calls on every admission.
func serverTLS(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
	c.MinVersion = tls.VersionTLS12
	c.CipherSuites = tls12CipherSuites
}

// metricsOptions serves /metrics on --metrics-bind-address: over HTTPS (a self-signed
// certificate, serverTLS) to clients whose bearer token the API server authenticates
// (TokenReview) and authorizes for GET on the non-resource URL /metrics
// (SubjectAccessReview); with --metrics-secure=false over plain HTTP to anyone.
func metricsOptions(opts options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: opts.metricsAddr}
	if opts.metricsSecure {
		m.SecureServing = true
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
		m.TLSOpts = []func(*tls.Config){serverTLS}
	}
	return m
}

// certOptions maps the flags onto the certificate controller's options.
func (o options) certOptions() certs.Options {
	c := certs.Options{
		Mode:           o.certMode,
		Namespace:      o.operatorNamespace,
		SecretName:     o.certSecret,
		ServiceName:    o.webhookService,
		CertDir:        o.certDir,
		CAValidity:     o.caValidity,
		ServerValidity: o.serverValidity,
		LookAhead:      o.certLookAhead,
		CheckInterval:  o.certCheckEvery,
		CAPropagation:  o.caPropagation,
		LeaderElection: o.leaderElect,
	}
	if o.podName != "" {
		// Each replica writes under its own name: who wrote a Secret or caBundle is in its
		// managedFields (scenario C12 checks that only the leader does).
		c.FieldOwner = "dynamo-operator/" + o.podName
	}
	if o.validatingName != "" {
		c.ValidatingWebhookConfigurations = []string{o.validatingName}
	}
	if o.mutatingName != "" {
		c.MutatingWebhookConfigurations = []string{o.mutatingName}
	}
	if o.conversionCRD != "" {
		c.ConversionCRDs = []string{o.conversionCRD}
	}
	return c
}
