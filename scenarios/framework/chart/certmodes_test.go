package chart_test

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
)

func TestAutomaticMode(t *testing.T) {
	o := render(t, testNamespace, "")

	assert.Contains(t, operatorArgs(t, o), "--webhook-cert-mode=automatic")
	vol := certVolume(t, o)
	assert.NotNil(t, vol.EmptyDir, "automatic mode: the operator writes its certificate files into an emptyDir")
	assert.Nil(t, vol.Secret)

	assert.Empty(t, o.ofKind("Issuer"), "no cert-manager objects in automatic mode")
	assert.Empty(t, o.ofKind("Certificate"))
	for _, w := range allWebhooks(t, o, "dynamo-validating", "dynamo-mutating") {
		assert.Empty(t, w.clientConfig.CABundle, "webhook %s: the operator injects the caBundle, the chart renders none on install", w.name)
	}
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		assert.NotContains(t, o.ofKind(kind)[0].GetAnnotations(), "cert-manager.io/inject-ca-from")
	}

	role := get[rbacv1.ClusterRole](t, o, "ClusterRole", "dynamo-operator")
	for _, want := range []struct{ group, resource, name string }{
		{"admissionregistration.k8s.io", "validatingwebhookconfigurations", "dynamo-validating"},
		{"admissionregistration.k8s.io", "mutatingwebhookconfigurations", "dynamo-mutating"},
		{"apiextensions.k8s.io", "customresourcedefinitions", dgdrCRD},
	} {
		for _, verb := range []string{"get", "update", "patch"} {
			assert.True(t, allows(role.Rules, want.group, want.resource, verb, want.name), "ClusterRole allows %s %s %s", verb, want.resource, want.name)
		}
		assert.False(t, allows(role.Rules, want.group, want.resource, "patch", "someone-elses"), "ClusterRole limits %s to resourceNames", want.resource)
		assert.False(t, allows(role.Rules, want.group, want.resource, "list", ""), "ClusterRole does not list %s", want.resource)
	}

	certs := get[rbacv1.Role](t, o, "Role", "dynamo-operator-certs")
	assert.Equal(t, testNamespace, certs.Namespace)
	for _, verb := range []string{"get", "watch", "create", "update", "patch"} {
		assert.True(t, allows(certs.Rules, "", "secrets", verb, "webhook-server-cert"), "the operator may %s its certificate Secret", verb)
	}
	assert.False(t, allows(certs.Rules, "", "secrets", "list", "webhook-server-cert"), "nothing lists Secrets")
	assert.False(t, allows(role.Rules, "", "secrets", "get", "webhook-server-cert"), "no cluster-wide Secret access")
}

func TestCertManagerModeWithOwnCAChain(t *testing.T) {
	o := render(t, testNamespace, `
webhook:
  certManager: {enabled: true, duration: 720h, renewBefore: 240h}
  certificateValidity: {ca: 43800h}`)

	assert.Contains(t, operatorArgs(t, o), "--webhook-cert-mode=cert-manager")
	assert.Equal(t, []string{"dynamo-selfsigned-issuer", "dynamo-webhook-ca-issuer"}, o.names("Issuer"))
	assert.Equal(t, []string{"dynamo-serving-cert", "dynamo-webhook-ca"}, o.names("Certificate"))

	selfSigned := get[cmv1.Issuer](t, o, "Issuer", "dynamo-selfsigned-issuer")
	assert.NotNil(t, selfSigned.Spec.SelfSigned)

	ca := get[cmv1.Certificate](t, o, "Certificate", "dynamo-webhook-ca")
	assert.True(t, ca.Spec.IsCA)
	assert.Equal(t, "dynamo-selfsigned-issuer", ca.Spec.IssuerRef.Name)
	assert.Equal(t, "Issuer", ca.Spec.IssuerRef.Kind)
	assert.Equal(t, 43800*time.Hour, ca.Spec.Duration.Duration)

	caIssuer := get[cmv1.Issuer](t, o, "Issuer", "dynamo-webhook-ca-issuer")
	require.NotNil(t, caIssuer.Spec.CA)
	assert.Equal(t, ca.Spec.SecretName, caIssuer.Spec.CA.SecretName, "the CA Issuer signs with the CA Certificate's Secret")

	serving := get[cmv1.Certificate](t, o, "Certificate", "dynamo-serving-cert")
	assert.False(t, serving.Spec.IsCA)
	assert.Equal(t, "webhook-server-cert", serving.Spec.SecretName)
	assert.Equal(t, []string{
		"dynamo-webhook-service",
		"dynamo-webhook-service.dynamo-system.svc",
		"dynamo-webhook-service.dynamo-system.svc.cluster.local",
	}, serving.Spec.DNSNames)
	assert.Equal(t, 720*time.Hour, serving.Spec.Duration.Duration)
	assert.Equal(t, 240*time.Hour, serving.Spec.RenewBefore.Duration)
	assert.Equal(t, "dynamo-webhook-ca-issuer", serving.Spec.IssuerRef.Name)
	assert.Equal(t, "Issuer", serving.Spec.IssuerRef.Kind)
	assert.Equal(t, "cert-manager.io", serving.Spec.IssuerRef.Group)

	const injectFrom = "dynamo-system/dynamo-serving-cert"
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "CustomResourceDefinition"} {
		name := map[string]string{
			"ValidatingWebhookConfiguration": "dynamo-validating",
			"MutatingWebhookConfiguration":   "dynamo-mutating",
			"CustomResourceDefinition":       dgdrCRD,
		}[kind]
		obj := o.find(kind, name)
		require.NotNil(t, obj, "%s %s rendered", kind, name)
		assert.Equal(t, injectFrom, obj.GetAnnotations()["cert-manager.io/inject-ca-from"], "%s %s inject-ca-from", kind, name)
	}
	for _, w := range allWebhooks(t, o, "dynamo-validating", "dynamo-mutating") {
		assert.Empty(t, w.clientConfig.CABundle, "webhook %s: cainjector fills the caBundle", w.name)
	}

	vol := certVolume(t, o)
	require.NotNil(t, vol.Secret, "cert-manager mode mounts the Secret cert-manager writes")
	assert.Equal(t, "webhook-server-cert", vol.Secret.SecretName)
	assert.True(t, ptrValue(vol.Secret.Optional), "the Secret volume is optional, so the pod starts before cert-manager issued it")

	assert.Equal(t, []string{"dynamo-operator-leader-election"}, o.names("Role"), "cert-manager mode: the operator needs no Secret access, only its leader-election Lease")
	assertNoSecretAccess(t, o)
	role := get[rbacv1.ClusterRole](t, o, "ClusterRole", "dynamo-operator")
	assert.False(t, allows(role.Rules, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "patch", "dynamo-validating"), "cainjector, not the operator, patches the caBundle")
	assert.False(t, allows(role.Rules, "apiextensions.k8s.io", "customresourcedefinitions", "patch", dgdrCRD))
}

func TestCertManagerModeWithIssuerRef(t *testing.T) {
	for _, kind := range []string{"Issuer", "ClusterIssuer"} {
		t.Run(kind, func(t *testing.T) {
			o := render(t, testNamespace, `{webhook: {certManager: {enabled: true, issuerRef: {kind: `+kind+`, name: corp-ca}}}}`)
			assert.Empty(t, o.ofKind("Issuer"), "a given issuerRef renders no issuers")
			assert.Empty(t, o.ofKind("ClusterIssuer"))
			assert.Equal(t, []string{"dynamo-serving-cert"}, o.names("Certificate"))
			serving := get[cmv1.Certificate](t, o, "Certificate", "dynamo-serving-cert")
			assert.Equal(t, "corp-ca", serving.Spec.IssuerRef.Name)
			assert.Equal(t, kind, serving.Spec.IssuerRef.Kind)
			assert.Equal(t, "cert-manager.io", serving.Spec.IssuerRef.Group)
			assert.Equal(t, "webhook-server-cert", serving.Spec.SecretName)
			assert.Equal(t, "dynamo-system/dynamo-serving-cert",
				o.find("ValidatingWebhookConfiguration", "dynamo-validating").GetAnnotations()["cert-manager.io/inject-ca-from"])
		})
	}
}

func TestExternalMode(t *testing.T) {
	caBundle := testCABundle(t)
	o := render(t, testNamespace, `
webhook:
  certificateSecret: {external: true, name: my-webhook-tls}
  caBundle: `+caBundle)

	args := operatorArgs(t, o)
	assert.Contains(t, args, "--webhook-cert-mode=external")
	assert.Contains(t, args, "--webhook-cert-secret=my-webhook-tls")

	for _, w := range allWebhooks(t, o, "dynamo-validating", "dynamo-mutating") {
		assert.Equal(t, caBundle, base64.StdEncoding.EncodeToString(w.clientConfig.CABundle), "webhook %s caBundle", w.name)
	}
	conversion := dgdrConversion(t, o)
	require.NotNil(t, conversion.Webhook)
	require.NotNil(t, conversion.Webhook.ClientConfig)
	assert.Equal(t, caBundle, base64.StdEncoding.EncodeToString(conversion.Webhook.ClientConfig.CABundle), "DGDR conversion caBundle")

	vol := certVolume(t, o)
	require.NotNil(t, vol.Secret)
	assert.Equal(t, "my-webhook-tls", vol.Secret.SecretName)
	assert.True(t, ptrValue(vol.Secret.Optional))

	assert.Empty(t, o.ofKind("Issuer"))
	assert.Empty(t, o.ofKind("Certificate"))
	assert.Equal(t, []string{"dynamo-operator-leader-election"}, o.names("Role"), "external mode: the operator never touches the Secret, only its leader-election Lease")
	assertNoSecretAccess(t, o)
	role := get[rbacv1.ClusterRole](t, o, "ClusterRole", "dynamo-operator")
	assert.False(t, allows(role.Rules, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "patch", "dynamo-validating"), "external mode: the chart sets the caBundle")
}

func TestCertModeMisconfigurationsFail(t *testing.T) {
	caBundle := testCABundle(t)
	cases := []struct {
		name   string
		values string
		want   string
	}{
		{
			name:   "external without caBundle",
			values: `{webhook: {certificateSecret: {external: true}}}`,
			want:   "webhook.certificateSecret.external=true requires webhook.caBundle: set it to the base64-encoded PEM of the CA that signed the certificate in Secret dynamo-system/webhook-server-cert",
		},
		{
			name:   "external with a caBundle that is not base64 PEM",
			values: `{webhook: {certificateSecret: {external: true}, caBundle: bm90IGEgY2VydA==}}`,
			want:   "webhook.caBundle must be a base64-encoded PEM certificate bundle",
		},
		{
			name:   "cert-manager and external together",
			values: `{webhook: {certManager: {enabled: true}, certificateSecret: {external: true}, caBundle: ` + caBundle + `}}`,
			want:   "webhook.certManager.enabled and webhook.certificateSecret.external are mutually exclusive",
		},
		{
			name:   "caBundle in automatic mode",
			values: `{webhook: {caBundle: ` + caBundle + `}}`,
			want:   "webhook.caBundle is only used with webhook.certificateSecret.external=true; in automatic mode",
		},
		{
			name:   "caBundle in cert-manager mode",
			values: `{webhook: {certManager: {enabled: true}, caBundle: ` + caBundle + `}}`,
			want:   "webhook.caBundle is only used with webhook.certificateSecret.external=true; in cert-manager mode",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorContains(t, renderError(t, tc.values), tc.want)
		})
	}
}
