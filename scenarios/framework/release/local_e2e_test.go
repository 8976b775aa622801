package release_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/local"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The end-to-end proof of the local provider and the chart together (issue 3): `helm install`
// of charts/dynamo-operator on a local cluster, operator Available, an invalid
// DynamoGraphDeployment denied through the webhook Service with the operator's message and a
// valid one admitted and stamped — in automatic and in cert-manager mode. One cluster (with
// cert-manager) serves both modes, one after the other; it is created by the first test that
// needs it and deleted by TestMain. `go test -short` skips it.

// stampedVersion is the operator version built into the binary the cluster runs.
const stampedVersion = "v0.0.0-install-e2e"

var shared struct {
	once     sync.Once
	provider *local.Provider
	err      error
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if p := shared.provider; p != nil {
		if err := destroy(p); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func destroy(p *local.Provider) error {
	cfg, cfgErr := p.Config()
	if err := p.Destroy(context.Background()); err != nil {
		return fmt.Errorf("deleting local cluster: %w", err)
	}
	if cfgErr == nil {
		if left := local.Leftovers(cfg); len(left) > 0 {
			return fmt.Errorf("deleting local cluster left behind:\n  %s", strings.Join(left, "\n  "))
		}
	}
	return nil
}

// localCluster creates the package's cluster on first use and returns its kubeconfig path.
func localCluster(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: brings up a local cluster (control plane, process node, cert-manager); run without -short")
	}
	shared.once.Do(func() {
		ctx := context.Background()
		operator, err := workspace.BuildOperator(ctx, stampedVersion, false)
		if err != nil {
			shared.err = err
			return
		}
		p := local.NewProvider()
		p.WithName(fmt.Sprintf("install-e2e-%d", os.Getpid()%10000))
		p.WithOpts(local.WithCertManager(), local.WithProgress(os.Stderr),
			local.WithImages(map[string]procnode.Image{chart.OperatorImageRepository(): {Binary: operator}}))
		shared.provider = p
		_, shared.err = p.Create(ctx)
	})
	require.NoError(t, shared.err, "creating the local cluster")
	return shared.provider.GetKubeconfig()
}

func TestHelmInstallOnLocalClusterAutomaticMode(t *testing.T) {
	proveRelease(t, &chart.Release{Mode: chart.Automatic, Namespace: "dynamo-automatic"}, nil)
}

func TestHelmInstallOnLocalClusterCertManagerMode(t *testing.T) {
	proveRelease(t, &chart.Release{Mode: chart.CertManager, Namespace: "dynamo-certmanager"}, nil)
}

// TestHelmInstallOnLocalClusterEveryCertificateSource covers the other ways install provides
// the serving certificate: cert-manager with an issuerRef (Issuer, ClusterIssuer), a Secret the
// user brings (external), and the same under OLM's file names.
func TestHelmInstallOnLocalClusterEveryCertificateSource(t *testing.T) {
	for _, kind := range []string{"Issuer", "ClusterIssuer"} {
		t.Run("cert-manager with "+kind, func(t *testing.T) {
			ref := chart.IssuerRef{Kind: kind, Name: "team-" + strings.ToLower(kind)}
			r := &chart.Release{Mode: chart.CertManager, IssuerRef: ref, Namespace: "dynamo-" + strings.ToLower(kind)}
			proveRelease(t, r, func(ctx context.Context, t *testing.T, kubeconfig string, r *chart.Release) []byte {
				cfg, err := release.RESTConfig(kubeconfig)
				require.NoError(t, err)
				issuer, err := release.CreateCAIssuer(ctx, cfg, ref, r.Namespace, "cert-manager", time.Minute)
				require.NoError(t, err)
				if kind == "ClusterIssuer" {
					t.Cleanup(func() { deleteClusterIssuers(t, cfg, ref.Name, ref.Name+"-selfsigned") })
				}
				return issuer.CAPEM
			})
		})
	}
	for _, mode := range []chart.CertMode{chart.External, chart.OLM} {
		t.Run(string(mode), func(t *testing.T) {
			proveRelease(t, &chart.Release{Mode: mode, Namespace: "dynamo-" + string(mode)}, func(context.Context, *testing.T, string, *chart.Release) []byte { return nil })
		})
	}
}

// prepare runs before Install and returns the CA the release's webhooks must be trusted with
// (nil: the CA of r.Serving, set by Install, or else of the Secret).
type prepare func(ctx context.Context, t *testing.T, kubeconfig string, r *chart.Release) []byte

// proveRelease installs r, checks admission and the served certificate through the Service,
// and uninstalls r and the CRDs, so the next test starts from a clean cluster. Every test uses
// its own namespaces, so none waits for another's namespaces to finish terminating.
func proveRelease(t *testing.T, r *chart.Release, before prepare) {
	kubeconfig := localCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	inst, err := release.NewInstaller(kubeconfig, release.WithLogf(t.Logf))
	require.NoError(t, err)
	kube, dyn := clients(t, kubeconfig)

	var wantCA []byte
	if before != nil {
		require.NoError(t, release.EnsureNamespace(ctx, kube, r.Namespace))
		wantCA = before(ctx, t, kubeconfig, r)
	}
	require.NoError(t, inst.Install(ctx, r))
	ns := "e2e-" + strings.TrimPrefix(r.Namespace, "dynamo-")
	t.Cleanup(func() {
		require.NoError(t, inst.Uninstall(context.Background(), r, release.UninstallOptions{CRDs: true}), "uninstalling %s", r)
		for _, n := range []string{ns, r.Namespace} {
			err := kube.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{})
			assert.False(t, err != nil && !apierrors.IsNotFound(err), "deleting namespace %s: %v", n, err)
		}
	})
	require.NoError(t, inst.WaitReady(ctx, r, 3*time.Minute))
	if wantCA == nil && r.Serving != nil {
		wantCA = r.Serving.CAPEM
	}

	require.NoError(t, release.EnsureNamespace(ctx, kube, ns))

	t.Run("the webhooks point at the release's Service", func(t *testing.T) {
		vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, r.ValidatingName(), metav1.GetOptions{})
		require.NoError(t, err)
		for _, w := range vwc.Webhooks {
			svc := w.ClientConfig.Service
			require.NotNil(t, svc, "webhook %s: expected clientConfig.service %s/%s, saw service %+v url %v", w.Name, r.Namespace, r.ServiceName(), svc, w.ClientConfig.URL)
			assert.Equal(t, svc.Name, r.ServiceName(), "webhook %s: expected clientConfig.service %s/%s, saw service %+v url %v", w.Name, r.Namespace, r.ServiceName(), svc, w.ClientConfig.URL)
			assert.Equal(t, r.Namespace, svc.Namespace, "webhook %s: expected clientConfig.service %s/%s, saw service %+v url %v", w.Name, r.Namespace, r.ServiceName(), svc, w.ClientConfig.URL)
			assert.Nil(t, w.ClientConfig.URL, "webhook %s: expected clientConfig.service %s/%s, saw service %+v url %v", w.Name, r.Namespace, r.ServiceName(), svc, w.ClientConfig.URL)
		}
	})

	t.Run("an invalid DynamoGraphDeployment is denied with the operator's message", func(t *testing.T) {
		_, err := dyn.Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, dynamo.InvalidGraphDeployment(ns, "no-services"), metav1.CreateOptions{})
		want := dynamo.DeniedBy(dynamo.GraphDeploymentValidatingWebhook) +
			": DynamoGraphDeployment " + ns + "/no-services is invalid: spec.services: Required value: at least one service is required"
		require.Error(t, err, "creating DynamoGraphDeployment %s/no-services:\nexpected error %q\nsaw            %v", ns, want, err)
		require.Equal(t, want, err.Error(), "creating DynamoGraphDeployment %s/no-services:\nexpected error %q\nsaw            %v", ns, want, err)
	})

	t.Run("a valid DynamoGraphDeployment is admitted and stamped with the operator version", func(t *testing.T) {
		got, err := dyn.Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, dynamo.GraphDeployment(ns, "graph"), metav1.CreateOptions{})
		require.NoError(t, err, "creating DynamoGraphDeployment %s/graph: expected it admitted, saw %v", ns, err)
		v := got.GetAnnotations()[dynamo.OriginVersionAnnotation]
		assert.Equal(t, stampedVersion, v, "DynamoGraphDeployment %s/graph: expected annotation %s=%q, saw %q", ns, dynamo.OriginVersionAnnotation, stampedVersion, v)
	})

	t.Run("the Service serves a certificate for <svc>.<ns>.svc signed by the expected CA", func(t *testing.T) {
		if wantCA == nil {
			s, err := kube.CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, corev1.SecretTypeTLS, s.Type, "Secret %s/%s: expected type %s, saw %s", r.Namespace, r.SecretName(), corev1.SecretTypeTLS, s.Type)
			wantCA = s.Data["ca.crt"]
		}
		svc, err := kube.CoreV1().Services(r.Namespace).Get(ctx, r.ServiceName(), metav1.GetOptions{})
		require.NoError(t, err)
		roots := x509.NewCertPool()
		require.True(t, roots.AppendCertsFromPEM(wantCA), "expected CA is not PEM: %q", wantCA)
		// On a local cluster the Service's ClusterIP:port is dialable from this host, exactly
		// where the API server connects; verifying like it does proves the whole TLS path.
		conn, err := tls.Dial("tcp", net.JoinHostPort(svc.Spec.ClusterIP, "443"), &tls.Config{ServerName: r.ServiceHost(), RootCAs: roots, MinVersion: tls.VersionTLS12})
		require.NoError(t, err, "TLS to Service %s/%s (%s) verified against CA %s", r.Namespace, r.ServiceName(), r.ServiceHost(), pki.DescribePEM(wantCA))
		leaf := conn.ConnectionState().PeerCertificates[0]
		_ = conn.Close() // only the handshake's certificate mattered
		if r.Serving != nil {
			assert.True(t, leaf.Equal(r.Serving.Leaf), "Service %s/%s: expected the user's certificate %s, saw %s", r.Namespace, r.ServiceName(), pki.Describe(r.Serving.Leaf), pki.Describe(leaf))
		}
	})

	t.Run("helm upgrade keeps the webhooks answering", func(t *testing.T) {
		require.NoError(t, inst.Upgrade(ctx, r))
		require.NoError(t, release.WaitAdmission(ctx, dyn, r, 30*time.Second))
	})

	if r.Mode == chart.External || r.Mode == chart.OLM {
		t.Run("the operator never wrote the user's Secret", func(t *testing.T) {
			s, err := kube.CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{})
			require.NoError(t, err)
			for _, m := range s.ManagedFields {
				assert.NotContains(t, m.Manager, "dynamo-operator", "Secret %s/%s: expected the operator never to write it, saw field manager %q (%s at %s)", r.Namespace, r.SecretName(), m.Manager, m.Operation, m.Time)
			}
		})
	}
}

func deleteClusterIssuers(t *testing.T, cfg *rest.Config, names ...string) {
	dyn := dynamic.NewForConfigOrDie(cfg)
	gvr := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "clusterissuers"}
	for _, n := range names {
		err := dyn.Resource(gvr).Delete(context.Background(), n, metav1.DeleteOptions{})
		assert.False(t, err != nil && !apierrors.IsNotFound(err), "deleting ClusterIssuer %s: %v", n, err)
	}
}

func clients(t *testing.T, kubeconfig string) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	cfg, err := release.RESTConfig(kubeconfig)
	require.NoError(t, err)
	return kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg)
}
