package chart_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/metrics"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// apiServer is a real etcd + kube-apiserver that the chart is installed into with Helm, so the API
// server itself validates every rendered object and evaluates the chart's RBAC.
type apiServer struct {
	env        *envtest.Environment
	kubeconfig string
	kube       kubernetes.Interface
	crds       apiextensionsclient.Interface
	dynamic    dynamic.Interface
}

func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	env := &envtest.Environment{
		BinaryAssetsDirectory: controlPlaneAssets(t),
		// The cert-manager CRDs, so the API server validates the chart's Issuers and Certificates.
		CRDDirectoryPaths:     []string{certManagerCRDDir(t)},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	require.NoError(t, err, "starting etcd + kube-apiserver from %s", env.BinaryAssetsDirectory)
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping etcd + kube-apiserver: %v", err)
		}
	})

	admin, err := env.AddUser(envtest.User{Name: "helm-admin", Groups: []string{"system:masters"}}, cfg)
	require.NoError(t, err, "provisioning the helm admin user")
	kubeconfig, err := admin.KubeConfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, kubeconfig, 0o600))

	return &apiServer{
		env:        env,
		kubeconfig: path,
		kube:       kubernetes.NewForConfigOrDie(cfg),
		crds:       apiextensionsclient.NewForConfigOrDie(cfg),
		dynamic:    dynamic.NewForConfigOrDie(rest.CopyConfig(cfg)),
	}
}

// controlPlaneAssets finds etcd and kube-apiserver (workspace.ControlPlaneAssets). A missing
// binary fails the test; it is never skipped.
func controlPlaneAssets(t *testing.T) string {
	t.Helper()
	dir, err := workspace.ControlPlaneAssets("etcd", "kube-apiserver")
	require.NoError(t, err)
	return dir
}

// certManagerCRDDir is deploy/crds of the cert-manager module in the build list.
func certManagerCRDDir(t *testing.T) string {
	t.Helper()
	root, err := workspace.Root()
	require.NoError(t, err)
	dir, err := certmanager.CRDDir(context.Background(), root)
	require.NoError(t, err)
	return dir
}

func (s *apiServer) helm(t *testing.T, namespace string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &s.kubeconfig
	flags.Namespace = &namespace
	cfg := new(action.Configuration)
	require.NoError(t, cfg.Init(flags, namespace, "secret", func(string, ...any) {}), "initialising helm for namespace %s", namespace)
	return cfg
}

func (s *apiServer) install(t *testing.T, release, namespace, valuesYAML string) {
	t.Helper()
	client := action.NewInstall(s.helm(t, namespace))
	client.ReleaseName = release
	client.Namespace = namespace
	client.CreateNamespace = true
	client.Timeout = time.Minute
	_, err := client.Run(testChart(t), values(t, valuesYAML))
	require.NoError(t, err, "helm install %s into %s", release, namespace)
}

func (s *apiServer) upgrade(t *testing.T, release, namespace, valuesYAML string, force bool) {
	t.Helper()
	client := action.NewUpgrade(s.helm(t, namespace))
	client.Namespace = namespace
	client.Force = force
	client.Timeout = time.Minute
	_, err := client.Run(release, testChart(t), values(t, valuesYAML))
	require.NoError(t, err, "helm upgrade %s in %s", release, namespace)
}

// injectCABundle writes caBundle where the operator's automatic mode writes it: every webhook of
// both configurations and the DGDR CRD's conversion webhook.
func (s *apiServer) injectCABundle(t *testing.T, validating, mutating string, caBundle []byte) {
	t.Helper()
	ctx := context.Background()
	vwc, err := s.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, validating, metav1.GetOptions{})
	require.NoError(t, err)
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig.CABundle = caBundle
	}
	_, err = s.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{})
	require.NoError(t, err, "injecting the caBundle into ValidatingWebhookConfiguration %s", validating)

	mwc, err := s.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mutating, metav1.GetOptions{})
	require.NoError(t, err)
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig.CABundle = caBundle
	}
	_, err = s.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, mwc, metav1.UpdateOptions{})
	require.NoError(t, err, "injecting the caBundle into MutatingWebhookConfiguration %s", mutating)

	crd, err := s.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, dgdrCRD, metav1.GetOptions{})
	require.NoError(t, err)
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = caBundle
	_, err = s.crds.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
	require.NoError(t, err, "injecting the caBundle into CRD %s", dgdrCRD)
}

func (s *apiServer) webhookConfigs(t *testing.T, validating, mutating string) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	t.Helper()
	ctx := context.Background()
	vwc, err := s.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, validating, metav1.GetOptions{})
	require.NoError(t, err, "getting ValidatingWebhookConfiguration %s", validating)
	mwc, err := s.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mutating, metav1.GetOptions{})
	require.NoError(t, err, "getting MutatingWebhookConfiguration %s", mutating)
	return vwc, mwc
}

func (s *apiServer) assertCABundles(t *testing.T, validating, mutating string, want []byte) {
	t.Helper()
	vwc, mwc := s.webhookConfigs(t, validating, mutating)
	for _, w := range append(validatingViews(vwc), mutatingViews(mwc)...) {
		assert.Equal(t, string(want), string(w.clientConfig.CABundle), "webhook %s caBundle", w.name)
	}
	crd, err := s.crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), dgdrCRD, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(want), string(crd.Spec.Conversion.Webhook.ClientConfig.CABundle), "CRD %s conversion caBundle", dgdrCRD)
}

// assertCan checks the API server authorizer's answer for a ServiceAccount, as
// `kubectl auth can-i --as` asks it. The RBAC authorizer reads Roles and bindings through
// informers, so a grant the chart made a moment ago may not be visible yet: an expected "yes" is
// asked again for a few seconds, an expected "no" once, since that lag never grants more.
func (s *apiServer) assertCan(t *testing.T, saNamespace, sa string, attrs authorizationv1.ResourceAttributes, want bool, msgAndArgs ...any) {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + saNamespace + ":" + sa,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + saNamespace, "system:authenticated"},
		ResourceAttributes: &attrs,
	}}
	allowed := func() bool {
		answer, err := s.kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
		require.NoError(t, err, "creating SubjectAccessReview for %s/%s", saNamespace, sa)
		return answer.Status.Allowed
	}
	got := allowed()
	for deadline := time.Now().Add(10 * time.Second); want && !got && time.Now().Before(deadline); got = allowed() {
		time.Sleep(100 * time.Millisecond)
	}
	assert.Equal(t, want, got, msgAndArgs...)
}

func decodeBase64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}

// TestChartOnAPIServer installs the chart with Helm into a real API server in every certificate
// mode and both topologies of the multi-operator setup, then checks what only a cluster can
// show: the objects are accepted, both releases coexist, RBAC grants what each operator needs and
// nothing more, and `helm upgrade` keeps the caBundles the operator injected.
func TestChartOnAPIServer(t *testing.T) {
	s := startAPIServer(t)
	const (
		platform = "platform-system"
		teamA    = "team-a"
		operator = "dynamo-operator" // ServiceAccount of a release named "dynamo"
	)

	t.Run("cluster-wide and restricted releases coexist", func(t *testing.T) {
		s.install(t, "dynamo", platform, "")
		s.install(t, "dynamo", teamA, `{namespaceRestriction: {enabled: true}, crds: {install: false}}`)

		cluster, _ := s.webhookConfigs(t, "dynamo-validating", "dynamo-mutating")
		restricted, restrictedMutating := s.webhookConfigs(t, "dynamo-validating-team-a", "dynamo-mutating-team-a")
		assert.Len(t, cluster.Webhooks, len(wantValidatingPaths))
		assert.Len(t, restrictedMutating.Webhooks, len(wantMutatingPaths))
		for _, w := range restricted.Webhooks {
			assert.Equal(t, map[string]string{"kubernetes.io/metadata.name": teamA}, w.NamespaceSelector.MatchLabels, "webhook %s", w.Name)
			assert.Equal(t, "dynamo-webhook-service", w.ClientConfig.Service.Name)
			assert.Equal(t, teamA, w.ClientConfig.Service.Namespace)
		}
		crd, err := s.crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), dgdrCRD, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, platform, crd.Spec.Conversion.Webhook.ClientConfig.Service.Namespace, "the CRD-installing release serves conversion")
	})

	t.Run("RBAC as the API server evaluates it", func(t *testing.T) {
		leases := func(verb, namespace string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: verb, Namespace: namespace, Name: ""}
		}
		for _, verb := range []string{"list", "watch"} {
			s.assertCan(t, platform, operator, leases(verb, ""), true, "cluster-wide operator may %s Leases in all namespaces", verb)
			s.assertCan(t, teamA, operator, leases(verb, ""), false, "restricted operator may not %s Leases cluster-wide", verb)
			s.assertCan(t, teamA, operator, leases(verb, "team-b"), false, "restricted operator may not %s Leases in team-b", verb)
		}
		for _, verb := range []string{"get", "create", "update", "delete"} {
			attrs := leases(verb, teamA)
			attrs.Name = "dynamo-operator-ns-lock"
			if verb == "create" {
				attrs.Name = ""
			}
			s.assertCan(t, teamA, operator, attrs, true, "restricted operator may %s its Lease", verb)
		}
		s.assertCan(t, platform, operator, leases("create", teamA), false, "cluster-wide operator never takes a namespace Lease")

		patchVWC := func(name string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Verb: "patch", Name: name}
		}
		s.assertCan(t, teamA, operator, patchVWC("dynamo-validating-team-a"), true, "restricted operator injects its own caBundle")
		s.assertCan(t, teamA, operator, patchVWC("dynamo-validating"), false, "restricted operator cannot touch the cluster-wide configuration")
		s.assertCan(t, platform, operator, patchVWC("dynamo-validating"), true)
		s.assertCan(t, platform, operator, patchVWC("dynamo-validating-team-a"), false)

		patchCRD := authorizationv1.ResourceAttributes{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verb: "patch", Name: dgdrCRD}
		s.assertCan(t, platform, operator, patchCRD, true, "the CRD-installing release injects the conversion caBundle")
		s.assertCan(t, teamA, operator, patchCRD, false)

		secret := authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "create", Namespace: platform}
		s.assertCan(t, platform, operator, secret, true, "automatic mode: the operator creates its certificate Secret")
		secret.Namespace = "team-b"
		s.assertCan(t, platform, operator, secret, false, "no Secret access outside the operator's namespace")
		// Every other verb is limited to the certificate Secret's name; nothing lists Secrets.
		for _, verb := range []string{"get", "watch", "update", "patch"} {
			named := authorizationv1.ResourceAttributes{Resource: "secrets", Verb: verb, Namespace: platform, Name: "webhook-server-cert"}
			s.assertCan(t, platform, operator, named, true, "the operator may %s its certificate Secret", verb)
			named.Name = "someone-elses-secret"
			s.assertCan(t, platform, operator, named, false, "the operator may not %s another Secret in its namespace", verb)
		}
		s.assertCan(t, platform, operator, authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list", Namespace: platform}, false, "the operator may not list Secrets")

		// The leader-election Lease, in each release's namespace, by name (create aside).
		for _, ns := range []string{platform, teamA} {
			for _, verb := range []string{"get", "update"} {
				attrs := leases(verb, ns)
				attrs.Name = "dynamo-operator-leader"
				s.assertCan(t, ns, operator, attrs, true, "the operator in %s may %s its leader-election Lease", ns, verb)
			}
			s.assertCan(t, ns, operator, leases("create", ns), true, "the operator in %s may create its leader-election Lease", ns)
		}
		otherLease := leases("update", platform)
		otherLease.Name = "someone-elses-lease"
		s.assertCan(t, platform, operator, otherLease, false, "the cluster-wide operator may update no other Lease in its namespace")

		watchDGD := authorizationv1.ResourceAttributes{Group: "nvidia.com", Resource: "dynamographdeployments", Verb: "watch", Namespace: teamA}
		s.assertCan(t, teamA, operator, watchDGD, true)
		watchDGD.Namespace = "team-b"
		s.assertCan(t, teamA, operator, watchDGD, false, "restricted operator sees only its namespace")
		s.assertCan(t, platform, operator, watchDGD, true)
	})

	t.Run("metrics: the operators review tokens, the harness's scraper may read /metrics", func(t *testing.T) {
		checkMetricsAccess(t, s, platform, teamA, operator)
	})

	t.Run("helm upgrade keeps the caBundles the operator injected", func(t *testing.T) {
		first := decodeBase64(t, testCABundle(t))
		s.injectCABundle(t, "dynamo-validating", "dynamo-mutating", first)

		// --force replaces the objects wholesale: only the chart's lookup keeps the caBundle.
		s.upgrade(t, "dynamo", platform, `{webhook: {failurePolicy: Ignore}}`, true)
		s.assertCABundles(t, "dynamo-validating", "dynamo-mutating", first)
		vwc, _ := s.webhookConfigs(t, "dynamo-validating", "dynamo-mutating")
		for _, w := range vwc.Webhooks {
			assert.Equal(t, admissionregistrationv1.Ignore, ptrValue(w.FailurePolicy), "webhook %s: the upgrade applied the new value", w.Name)
		}

		// The operator rotates its CA; the next upgrade patches from a manifest that carried the
		// old bundle, and must not put it back.
		rotated := decodeBase64(t, testCABundle(t))
		s.injectCABundle(t, "dynamo-validating", "dynamo-mutating", rotated)
		s.upgrade(t, "dynamo", platform, `{webhook: {failurePolicy: Ignore, timeoutSeconds: 5}}`, false)
		s.assertCABundles(t, "dynamo-validating", "dynamo-mutating", rotated)
		vwc, _ = s.webhookConfigs(t, "dynamo-validating", "dynamo-mutating")
		for _, w := range vwc.Webhooks {
			assert.Equal(t, int32(5), ptrValue(w.TimeoutSeconds), "webhook %s", w.Name)
		}
	})

	t.Run("cert-manager and external modes are accepted", func(t *testing.T) {
		s.install(t, "dynamo-cm", "cm-system", `{crds: {install: false}, webhook: {certManager: {enabled: true}}}`)
		s.install(t, "dynamo-cmci", "cmci-system", `{crds: {install: false}, webhook: {certManager: {enabled: true, issuerRef: {kind: ClusterIssuer, name: corp-ca}}}}`)
		caBundle := testCABundle(t)
		s.install(t, "dynamo-ext", "ext-system", `{crds: {install: false}, webhook: {certificateSecret: {external: true}, caBundle: `+caBundle+`}}`)

		certificates := s.dynamic.Resource(schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"})
		issuers := s.dynamic.Resource(schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"})
		ctx := context.Background()
		for _, want := range []struct{ namespace, name string }{{"cm-system", "dynamo-cm-serving-cert"}, {"cm-system", "dynamo-cm-webhook-ca"}, {"cmci-system", "dynamo-cmci-serving-cert"}} {
			_, err := certificates.Namespace(want.namespace).Get(ctx, want.name, metav1.GetOptions{})
			require.NoError(t, err, "Certificate %s/%s", want.namespace, want.name)
		}
		list, err := issuers.Namespace("cm-system").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Len(t, list.Items, 2, "self-signed and CA Issuer")

		vwc, mwc := s.webhookConfigs(t, "dynamo-cm-validating", "dynamo-cm-mutating")
		assert.Equal(t, "cm-system/dynamo-cm-serving-cert", vwc.Annotations["cert-manager.io/inject-ca-from"])
		assert.Equal(t, "cm-system/dynamo-cm-serving-cert", mwc.Annotations["cert-manager.io/inject-ca-from"])

		vwc, mwc = s.webhookConfigs(t, "dynamo-ext-validating", "dynamo-ext-mutating")
		for _, w := range append(validatingViews(vwc), mutatingViews(mwc)...) {
			assert.Equal(t, caBundle, base64.StdEncoding.EncodeToString(w.clientConfig.CABundle), "webhook %s caBundle", w.name)
		}
	})
}

// checkMetricsAccess runs against the two releases TestChartOnAPIServer installed ("dynamo" in
// platform, cluster-wide, and in teamA, restricted): each operator may create the TokenReviews
// and SubjectAccessReviews that authenticate and authorize a scraper, and metrics.Reader's token
// is a ServiceAccount the API server authenticates and lets get /metrics.
func checkMetricsAccess(t *testing.T, s *apiServer, platform, teamA, operator string) {
	ctx := context.Background()
	for _, ns := range []string{platform, teamA} {
		s.assertCan(t, ns, operator, authorizationv1.ResourceAttributes{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"}, true,
			"the operator in %s authenticates scrapers", ns)
		s.assertCan(t, ns, operator, authorizationv1.ResourceAttributes{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verb: "create"}, true,
			"the operator in %s authorizes scrapers", ns)
	}

	for _, rel := range []*chart.Release{
		{Name: "dynamo", Namespace: platform},
		{Name: "dynamo", Namespace: teamA, Values: map[string]any{"namespaceRestriction": map[string]any{"enabled": true}}},
	} {
		r := metrics.NewReader(s.kube, rel)
		token, err := r.Token(ctx)
		require.NoError(t, err, "%s", rel)
		again, err := r.Token(ctx)
		require.NoError(t, err)
		assert.Equal(t, token, again, "the token is reused until half its lifetime is gone")

		review, err := s.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.True(t, review.Status.Authenticated, "%s: token not authenticated: %s", rel, review.Status.Error)
		user := review.Status.User
		assert.Equal(t, "system:serviceaccount:"+rel.Namespace+":"+metrics.MetricsScraper, user.Username)

		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, Groups: user.Groups,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}
		allowed := false
		for deadline := time.Now().Add(10 * time.Second); !allowed && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			answer, err := s.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			require.NoError(t, err)
			allowed = answer.Status.Allowed
		}
		assert.True(t, allowed, "%s: the scraper may not get /metrics", rel)
		binding, err := s.kube.RbacV1().ClusterRoleBindings().Get(ctx, rel.MetricsReaderName()+"-"+metrics.MetricsScraper, metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, binding.OwnerReferences, 1)
		assert.Equal(t, rel.MetricsReaderName(), binding.OwnerReferences[0].Name, "uninstalling the release removes the binding")
	}
}
