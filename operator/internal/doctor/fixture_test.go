package doctor

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gauntlet-dev/gauntlet/operator/internal/scheme"
	"github.com/gauntlet-dev/gauntlet/operator/internal/testcluster"
)

// testCA is a CA that issues serving certificates for the tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t testing.TB, cn string) *testCA {
	return newCAValid(t, cn, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

// newCAValid is a CA valid from notBefore to notAfter.
func newCAValid(t testing.TB, cn string, notBefore, notAfter time.Time) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return selfSigned(t, key, cn, notBefore, notAfter)
}

// renewed is the same CA (subject and key) re-signed for another validity: what signs ca's
// certificates verifies against either.
func (ca *testCA) renewed(t testing.TB, notBefore, notAfter time.Time) *testCA {
	return selfSigned(t, ca.key, ca.cert.Subject.CommonName, notBefore, notAfter)
}

func selfSigned(t testing.TB, key *ecdsa.PrivateKey, cn string, notBefore, notAfter time.Time) *testCA {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// servingPair is a serving certificate and its key, as PEM and as a tls.Certificate.
type servingPair struct {
	certPEM, keyPEM []byte
	tls             tls.Certificate
}

// issue signs a serving certificate for dnsNames valid from notBefore to notAfter.
func (ca *testCA) issue(t testing.TB, dnsNames []string, notBefore, notAfter time.Time) servingPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		DNSNames:     dnsNames,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	p := servingPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	p.tls, err = tls.X509KeyPair(p.certPEM, p.keyPEM)
	require.NoError(t, err)
	return p
}

// validFor issues a certificate valid now for names.
func (ca *testCA) validFor(t testing.TB, names ...string) servingPair {
	return ca.issue(t, names, time.Now().Add(-time.Hour), time.Now().Add(12*time.Hour))
}

// release is a healthy installation of the chart, as objects: what `helm install` renders
// plus what the operator, cert-manager or the kubelet would have written (Secret, caBundles,
// EndpointSlice, Pod status).
type release struct {
	name, namespace string
	testNamespace   string
	mode            string
	clusterIP       string
	servicePort     int32
	// podIP is the Pod's (and EndpointSlice's) address. The API server rejects loopback
	// addresses in EndpointSlices, so against envtest it is a non-loopback address that
	// nothing answers on; the ClusterIP is the reachable path, as with kube-proxy.
	podIP   string
	podPort int32
	ca      *testCA
	serving servingPair
	// timeoutSeconds is every webhook's.
	timeoutSeconds int32
}

func newRelease(t testing.TB) *release {
	r := &release{
		name: "dynamo", namespace: "dynamo-system", testNamespace: "team-x", mode: "automatic",
		clusterIP: "127.0.0.1", servicePort: 443, podIP: "10.244.0.5", podPort: 9443,
		ca: newCA(t, "dynamo-webhook-service-ca"), timeoutSeconds: 10,
	}
	r.serving = r.ca.validFor(t, r.host())
	return r
}

func (r *release) service() string    { return r.name + "-webhook-service" }
func (r *release) host() string       { return r.service() + "." + r.namespace + ".svc" }
func (r *release) deployment() string { return r.name + "-operator" }
func (r *release) validating() string { return r.name + "-validating" }
func (r *release) mutating() string   { return r.name + "-mutating" }
func (r *release) podName() string    { return r.name + "-operator-6d5f7c9b8-x2x7q" }

func (r *release) selectorLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "dynamo-operator", "app.kubernetes.io/instance": r.name}
}

// args are the operator's arguments as the chart renders them.
func (r *release) args() []string {
	return []string{
		"--metrics-bind-address=:8080",
		"--health-probe-bind-address=:8081",
		"--webhook-port=9443",
		"--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs",
		"--webhook-cert-mode=" + r.mode,
		"--webhook-cert-secret=webhook-server-cert",
		"--webhook-service=" + r.service(),
		"--validating-webhook-configuration=" + r.validating(),
		"--mutating-webhook-configuration=" + r.mutating(),
		"--conversion-crd=dynamographdeploymentrequests.nvidia.com",
		"--cert-check-interval=30s",
		"--zap-log-level=info",
	}
}

func namespaceObject(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/metadata.name": name}}}
}

// objects are the healthy release's objects (namespaces first).
func (r *release) objects(t testing.TB) []client.Object {
	t.Helper()
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: r.deployment(), Namespace: r.namespace, Labels: r.selectorLabels()},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: r.selectorLabels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: r.selectorLabels()},
				Spec:       r.podSpec(),
			},
		},
		Status: appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: r.service(), Namespace: r.namespace},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: r.clusterIP, Selector: r.selectorLabels(),
			Ports: []corev1.ServicePort{{Name: "webhook", Port: r.servicePort, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromString("webhook-server")}},
		},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: r.service() + "-abcde", Namespace: r.namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: r.service()}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("webhook"), Port: ptr.To(r.podPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{r.podIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: r.namespace, Name: r.podName()},
		}},
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-server-cert", Namespace: r.namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": r.serving.certPEM, "tls.key": r.serving.keyPEM, "ca.crt": r.ca.pem},
	}
	vwc, mwc := r.webhookConfigurations(t)
	return []client.Object{
		namespaceObject(r.namespace), namespaceObject(r.testNamespace),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: r.deployment(), Namespace: r.namespace}},
		deploy, svc, slice, secret, vwc, mwc, r.pod(),
	}
}

func (r *release) podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:           r.deployment(),
		AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{{
			Name: "operator", Image: "dynamo-operator:test", Args: r.args(),
			Ports: []corev1.ContainerPort{{Name: "webhook-server", ContainerPort: r.podPort}},
		}},
	}
}

// pod is the operator's running, ready Pod.
func (r *release) pod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: r.podName(), Namespace: r.namespace, Labels: r.selectorLabels()},
		Spec:       withNode(r.podSpec()),
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: r.podIP, PodIPs: []corev1.PodIP{{IP: r.podIP}},
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "operator", Ready: true, Image: "dynamo-operator:test"}},
		},
	}
}

// webhookConfigurations renders the generated manifests the way the chart does: names,
// clientConfig.service, caBundle, failurePolicy, timeoutSeconds, namespaceSelector.
func (r *release) webhookConfigurations(t testing.TB) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	t.Helper()
	vwc, mwc, err := testcluster.GeneratedWebhookConfigurations()
	require.NoError(t, err)
	cc := func(path *string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Namespace: r.namespace, Name: r.service(), Path: path, Port: ptr.To(r.servicePort)},
			CABundle: bytes.Clone(r.ca.pem),
		}
	}
	vwc.TypeMeta, mwc.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
	vwc.Name, mwc.Name = r.validating(), r.mutating()
	forEachWebhook(func(h webhookFields) {
		*h.clientConfig = cc(h.clientConfig.Service.Path)
		*h.failurePolicy = ptr.To(admissionregistrationv1.Fail)
		*h.timeoutSeconds = ptr.To(r.timeoutSeconds)
		*h.namespaceSelector = &metav1.LabelSelector{}
	}, vwc, mwc)
	return vwc, mwc
}

// withConfigurations gives s the release's webhook configurations, as checkConfigurations
// finds them.
func withConfigurations(t testing.TB, s *session, r *release) {
	t.Helper()
	vwc, mwc := r.webhookConfigurations(t)
	s.validating = []*admissionregistrationv1.ValidatingWebhookConfiguration{vwc}
	s.mutating = []*admissionregistrationv1.MutatingWebhookConfiguration{mwc}
}

// webhookFields points at the fields tests set of one validating or mutating webhook.
type webhookFields struct {
	clientConfig      *admissionregistrationv1.WebhookClientConfig
	namespaceSelector **metav1.LabelSelector
	failurePolicy     **admissionregistrationv1.FailurePolicyType
	timeoutSeconds    **int32
}

// forEachWebhook applies fn to every webhook of configs, Validating- and
// MutatingWebhookConfigurations.
func forEachWebhook(fn func(webhookFields), configs ...client.Object) {
	for _, c := range configs {
		switch c := c.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for i := range c.Webhooks {
				h := &c.Webhooks[i]
				fn(webhookFields{&h.ClientConfig, &h.NamespaceSelector, &h.FailurePolicy, &h.TimeoutSeconds})
			}
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for i := range c.Webhooks {
				h := &c.Webhooks[i]
				fn(webhookFields{&h.ClientConfig, &h.NamespaceSelector, &h.FailurePolicy, &h.TimeoutSeconds})
			}
		}
	}
}

// edit applies fn to the object of type T named name among objs (fn returns false to drop it).
func edit[T client.Object](t testing.TB, objs []client.Object, name string, fn func(T) bool) []client.Object {
	t.Helper()
	var out []client.Object
	found := false
	for _, o := range objs {
		if typed, ok := o.(T); ok && o.GetName() == name {
			found = true
			if !fn(typed) {
				continue
			}
		}
		out = append(out, o)
	}
	require.True(t, found, "no %T named %s among the fixture's objects", *new(T), name)
	return out
}

// fakeDoctor is a Doctor over controller-runtime's fake client, for the checks that only
// read objects.
func fakeDoctor(t testing.TB, r *release, objs []client.Object, now time.Time) *Doctor {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&corev1.Pod{}, &appsv1.Deployment{}).Build()
	return &Doctor{
		opts:   Options{Release: r.name, Namespace: r.namespace, TestNamespace: r.testNamespace, Now: func() time.Time { return now }}.withDefaults(),
		cfg:    &rest.Config{Host: "https://fake.invalid"},
		client: c,
	}
}

// checksByID picks checks out of the documented list, keeping its order.
func checksByID(t testing.TB, ids ...string) []check {
	t.Helper()
	return checksOf(t, allChecks(), ids...)
}

// checksOf picks checks out of a checklist by ID, keeping its order.
func checksOf(t testing.TB, list []check, ids ...string) []check {
	t.Helper()
	var out []check
	for _, c := range list {
		for _, id := range ids {
			if c.id == id {
				out = append(out, c)
			}
		}
	}
	require.Len(t, out, len(ids), "unknown check among %v", ids)
	return out
}

// requireOneRoot asserts that report has exactly one root cause, the check id with
// scenario (empty for an undocumented cause), whose cause and fix include each of cause
// and fix, and returns it.
func requireOneRoot(t testing.TB, report Report, id, scenario string, cause, fix []string) Result {
	t.Helper()
	roots := report.Roots()
	var b bytes.Buffer
	require.NoError(t, report.WriteText(&b))
	require.Len(t, roots, 1, "want exactly one root cause (%s); report:\n%s", id, b.String())
	require.Equal(t, id, roots[0].ID, "report:\n%s", b.String())
	require.Equal(t, scenario, roots[0].Scenario, "report:\n%s", b.String())
	require.NotEmpty(t, roots[0].Cause)
	require.NotEmpty(t, roots[0].Fix)
	for _, want := range cause {
		assert.Contains(t, roots[0].Cause, want)
	}
	for _, want := range fix {
		assert.Contains(t, roots[0].Fix, want)
	}
	return roots[0]
}

// requireResult returns check id's result in report and its details joined by newlines,
// asserting that they include each of details.
func requireResult(t testing.TB, report Report, id string, details []string) (Result, string) {
	t.Helper()
	res, ok := report.Find(id)
	require.True(t, ok, "no result of check %s", id)
	joined := strings.Join(res.Details, "\n")
	for _, want := range details {
		assert.Contains(t, joined, want)
	}
	return res, joined
}

func runChecks(ctx context.Context, d *Doctor, checks []check) Report { return d.run(ctx, checks) }

// withNode binds a Pod spec to the test Node, whose kubelet serves pods/log.
func withNode(spec corev1.PodSpec) corev1.PodSpec {
	spec.NodeName = nodeName
	return spec
}

// rbacObjects are the chart's automatic-mode cert-controller RBAC for the release
// (templates/rbac.yaml: dynamo-operator.rules.caInjection and .certSecret).
func (r *release) rbacObjects() []client.Object {
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: r.deployment(), Namespace: r.namespace}
	crd := "dynamographdeploymentrequests.nvidia.com"
	return []client.Object{
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: r.deployment()},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"}, ResourceNames: []string{r.validating()}, Verbs: []string{"get", "update", "patch"}},
				{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, ResourceNames: []string{r.mutating()}, Verbs: []string{"get", "update", "patch"}},
				{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{crd}, Verbs: []string{"get", "update", "patch"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.deployment()},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.deployment()},
			Subjects:   []rbacv1.Subject{sa},
		},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: r.deployment() + "-certs", Namespace: r.namespace},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.deployment() + "-certs", Namespace: r.namespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.deployment() + "-certs"},
			Subjects:   []rbacv1.Subject{sa},
		},
	}
}
