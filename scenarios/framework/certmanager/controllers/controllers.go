// Package controllers runs real cert-manager code against a cluster that has no container
// runtime: the certificate controllers (issuing, key manager, readiness, request manager,
// revision manager, trigger), the CertificateRequest approver and the CA and self-signed
// signers, the Issuer and ClusterIssuer controllers, and the cainjector, all from the
// github.com/cert-manager/cert-manager packages. cert-manager's own mains live in modules the Go
// module proxy does not serve; this package composes the same public building blocks. It is
// separate from package certmanager (CRDs, readiness) so that importing those does not compile
// every controller into a test binary.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmapi "github.com/cert-manager/cert-manager/pkg/api"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"

	// Each controller and signer registers itself with pkg/controller (or pkg/issuer) in init.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// Controllers are the cert-manager controllers Run starts, by their registered names. The
// approver and the issuers controllers are not optional: without the approver every
// CertificateRequest stays unapproved, without the issuers controller no Issuer becomes Ready.
var Controllers = []string{
	"certificaterequests-approver",
	"certificaterequests-issuer-ca",
	"certificaterequests-issuer-selfsigned",
	"certificates-issuing",
	"certificates-key-manager",
	"certificates-readiness",
	"certificates-request-manager",
	"certificates-revision-manager",
	"certificates-trigger",
	"clusterissuers",
	"issuers",
}

// Options configure Run.
type Options struct {
	// Kubeconfig is the path of a kubeconfig with cluster-admin rights; empty means in-cluster.
	Kubeconfig string
	// ClusterResourceNamespace holds the Secrets ClusterIssuers refer to (upstream chart:
	// cert-manager's own namespace).
	ClusterResourceNamespace string
	// Workers per controller; upstream's default is 5.
	Workers int
	// Log receives every controller's log lines.
	Log logr.Logger
	// Components to run: ComponentControllers, ComponentCAInjector; empty runs both (the
	// local provider's one process). In a cluster each runs in its own Deployment, as upstream.
	Components []string
}

// The components Run can run.
const (
	ComponentControllers = "controllers"
	ComponentCAInjector  = "cainjector"
)

// Run runs the controllers and/or the cainjector (opts.Components) until ctx is cancelled or one of them fails.
func Run(ctx context.Context, opts Options) error {
	if opts.Workers == 0 {
		opts.Workers = 5
	}
	if opts.ClusterResourceNamespace == "" {
		opts.ClusterResourceNamespace = "cert-manager"
	}
	if len(opts.Components) == 0 {
		opts.Components = []string{ComponentControllers, ComponentCAInjector}
	}
	for _, c := range opts.Components {
		if c != ComponentControllers && c != ComponentCAInjector {
			return fmt.Errorf("unknown component %q (want %s or %s)", c, ComponentControllers, ComponentCAInjector)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctrl.SetLogger(opts.Log.WithName("cainjector"))
	ctx = logf.NewContext(ctx, opts.Log)

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		cancel()
	}
	start := func(name string, run func(context.Context) error) {
		wg.Go(func() {
			if err := run(ctx); err != nil {
				fail(fmt.Errorf("%s: %w", name, err))
			}
		})
	}
	for _, c := range opts.Components {
		if c == ComponentControllers {
			start(c, func(ctx context.Context) error { return runControllers(ctx, opts, start) })
		} else {
			start(c, func(ctx context.Context) error { return runCAInjector(ctx, opts) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runControllers builds each controller from pkg/controller's registry, the way cert-manager's
// controller main does, then starts the shared informers they registered and runs them.
func runControllers(ctx context.Context, opts Options, start func(string, func(context.Context) error)) error {
	factory, err := controller.NewContextFactory(ctx, contextOptions(opts))
	if err != nil {
		return fmt.Errorf("building controller context: %w", err)
	}
	known := controller.Known()
	type runnable struct {
		name string
		ctl  controller.Interface
	}
	var run []runnable
	for _, name := range Controllers {
		ctor, ok := known[name]
		if !ok {
			return fmt.Errorf("controller %q is not registered (registered: %v)", name, registered(known))
		}
		ctl, err := ctor(factory)
		if err != nil {
			return fmt.Errorf("constructing controller %q: %w", name, err)
		}
		run = append(run, runnable{name, ctl})
	}
	// The informer factories are shared by every Context the factory builds: starting them
	// through one Context starts the informers all controllers registered above.
	shared, err := factory.Build()
	if err != nil {
		return fmt.Errorf("building controller context: %w", err)
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	for _, r := range run {
		start("controller "+r.name, func(ctx context.Context) error { return r.ctl.Run(opts.Workers, ctx) })
	}
	<-ctx.Done()
	return nil
}

// contextOptions are upstream's controller defaults (cmd/controller/app/options), minus ACME
// and ingress/gateway shims, which gauntlet does not run.
func contextOptions(opts Options) controller.ContextOptions {
	return controller.ContextOptions{
		Kubeconfig:         opts.Kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: opts.ClusterResourceNamespace,
		},
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverResourceRequestCPU:    resource.MustParse("10m"),
			HTTP01SolverResourceRequestMemory: resource.MustParse("64Mi"),
			HTTP01SolverResourceLimitsCPU:     resource.MustParse("100m"),
			HTTP01SolverResourceLimitsMemory:  resource.MustParse("64Mi"),
			DNS01CheckRetryPeriod:             10 * time.Second,
		},
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: 60},
	}
}

func registered(known map[string]controller.Constructor) []string {
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// runCAInjector runs cert-manager's cainjector reconcilers for validating and mutating webhook
// configurations, CRDs and APIServices on a controller-runtime manager.
func runCAInjector(ctx context.Context, opts Options) error {
	cfg, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return err
	}
	// The injector's server-side apply field manager is derived from the user agent, as upstream.
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(apiregistrationv1.AddToScheme(scheme))
	utilruntime.Must(cmapi.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// As upstream: Secrets are watched metadata-only and read uncached, so the injector
		// never holds every Secret of the cluster in memory.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return fmt.Errorf("creating cainjector manager: %w", err)
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		// The names cainjector's setups register under (pkg/controller/cainjector/setup.go).
		EnabledReconcilersFor: map[string]bool{
			"mutatingwebhookconfiguration":   true,
			"validatingwebhookconfiguration": true,
			"apiservice":                     true,
			"customresourcedefinition":       true,
		},
	}); err != nil {
		return fmt.Errorf("registering cainjector reconcilers: %w", err)
	}
	return mgr.Start(ctx)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}
