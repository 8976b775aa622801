package local_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// TestCertManager proves cert-manager on a local cluster is the real thing: a self-signed
// Issuer signs a CA Certificate, a CA Issuer built on it signs a serving Certificate into a
// Secret, and cainjector copies that CA into a webhook configuration annotated with
// cert-manager.io/inject-ca-from.
func TestCertManager(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: brings up a local cluster (etcd, apiserver, node); run without -short")
	}
	const ns = "cert-manager-proof"
	dnsName := "webhook." + ns + ".svc"
	feature := features.New("cert-manager on local").
		WithLabel("provider", "local").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_, err := kubeClient(t, cfg).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			require.NoError(t, err, "creating Namespace %s", ns)
			return ctx
		}).
		Assess("self-signed Issuer → CA Certificate → CA Issuer → serving Certificate → Secret", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cm := cmClient(t, cfg)
			issuers := cm.CertmanagerV1().Issuers(ns)
			certs := cm.CertmanagerV1().Certificates(ns)
			create := func(what string, err error) {
				t.Helper()
				require.NoError(t, err, "creating %s", what)
			}
			_, err := issuers.Create(ctx, &cmv1.Issuer{ObjectMeta: metav1.ObjectMeta{Name: "selfsigned"},
				Spec: cmv1.IssuerSpec{IssuerConfig: cmv1.IssuerConfig{SelfSigned: &cmv1.SelfSignedIssuer{}}}}, metav1.CreateOptions{})
			create("Issuer "+ns+"/selfsigned", err)
			_, err = certs.Create(ctx, &cmv1.Certificate{ObjectMeta: metav1.ObjectMeta{Name: "root-ca"},
				Spec: cmv1.CertificateSpec{IsCA: true, CommonName: "gauntlet root CA", SecretName: "root-ca",
					IssuerRef: cmmeta.IssuerReference{Name: "selfsigned", Kind: "Issuer"}}}, metav1.CreateOptions{})
			create("Certificate "+ns+"/root-ca", err)
			_, err = issuers.Create(ctx, &cmv1.Issuer{ObjectMeta: metav1.ObjectMeta{Name: "ca"},
				Spec: cmv1.IssuerSpec{IssuerConfig: cmv1.IssuerConfig{CA: &cmv1.CAIssuer{SecretName: "root-ca"}}}}, metav1.CreateOptions{})
			create("Issuer "+ns+"/ca", err)
			_, err = certs.Create(ctx, &cmv1.Certificate{ObjectMeta: metav1.ObjectMeta{Name: "serving"},
				Spec: cmv1.CertificateSpec{DNSNames: []string{dnsName}, SecretName: "serving-tls",
					IssuerRef: cmmeta.IssuerReference{Name: "ca", Kind: "Issuer"}}}, metav1.CreateOptions{})
			create("Certificate "+ns+"/serving", err)
			for _, name := range []string{"root-ca", "serving"} {
				require.NoError(t, certmanager.WaitObjectReady(ctx, restConfig(cfg), cmv1.CertificateKind, ns, name, 60*time.Second))
			}

			secret, err := kubeClient(t, cfg).CoreV1().Secrets(ns).Get(ctx, "serving-tls", metav1.GetOptions{})
			require.NoError(t, err, "reading Secret %s/serving-tls", ns)
			for _, key := range []string{"tls.crt", "tls.key", "ca.crt"} {
				require.NotEmpty(t, secret.Data[key], "Secret %s/serving-tls has no %s", ns, key)
			}
			leaf := parseCert(t, secret.Data["tls.crt"])
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(secret.Data["ca.crt"])
			_, err = leaf.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: roots})
			require.NoError(t, err, "serving certificate does not verify for %s against the Secret's ca.crt", dnsName)
			ca := parseCert(t, secret.Data["ca.crt"])
			require.Equal(t, "gauntlet root CA", ca.Subject.CommonName, "ca.crt is %q (CA=%v), want the self-signed root CA", ca.Subject.CommonName, ca.IsCA)
			require.True(t, ca.IsCA, "ca.crt is %q (CA=%v), want the self-signed root CA", ca.Subject.CommonName, ca.IsCA)
			return ctx
		}).
		Assess("cainjector fills a ValidatingWebhookConfiguration's caBundle from inject-ca-from", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			kube := kubeClient(t, cfg)
			name := "gauntlet-inject-proof"
			vwcs := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
			_, err := vwcs.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
				ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"cert-manager.io/inject-ca-from": ns + "/serving"}},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{{
					Name: "inject.gauntlet.dev",
					ClientConfig: admissionregistrationv1.WebhookClientConfig{
						Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "webhook", Path: ptr.To("/validate")},
					},
					// Matches nothing real: this configuration only carries the injected bundle.
					Rules: []admissionregistrationv1.RuleWithOperations{{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"gauntlet.dev"}, APIVersions: []string{"v1"}, Resources: []string{"nothing"}},
					}},
					SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
					AdmissionReviewVersions: []string{"v1"},
				}},
			}, metav1.CreateOptions{})
			require.NoError(t, err, "creating ValidatingWebhookConfiguration %s", name)
			t.Cleanup(func() { _ = vwcs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
			secret, err := kube.CoreV1().Secrets(ns).Get(ctx, "serving-tls", metav1.GetOptions{})
			require.NoError(t, err)
			var got []byte
			err = poll.Until(ctx, "cainjector to fill the caBundle of ValidatingWebhookConfiguration "+name, 30*time.Second, func(ctx context.Context) (bool, string, error) {
				vwc, err := vwcs.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				got = vwc.Webhooks[0].ClientConfig.CABundle
				return len(got) > 0, "empty caBundle", nil
			})
			require.NoError(t, err)
			require.True(t, bytes.Equal(got, secret.Data["ca.crt"]), "injected caBundle differs from Secret %s/serving-tls ca.crt:\n%s\nwant\n%s", ns, got, secret.Data["ca.crt"])
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_ = kubeClient(t, cfg).CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			return ctx
		}).
		Feature()
	testenv.Test(t, feature)
}

func cmClient(t *testing.T, cfg *envconf.Config) cmclient.Interface {
	t.Helper()
	cs, err := cmclient.NewForConfig(restConfig(cfg))
	require.NoError(t, err)
	return cs
}

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	require.NotNil(t, block, "no PEM block in %q", pemBytes)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}
