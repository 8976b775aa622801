package release

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// ReadSecretCertificates reads and parses r's certificate Secret, or says why it cannot.
func ReadSecretCertificates(ctx context.Context, kube kubernetes.Interface, r *chart.Release) (pki.SecretCertificates, error) {
	ref := r.Namespace + "/" + r.SecretName()
	s, err := kube.CoreV1().Secrets(r.Namespace).Get(ctx, r.SecretName(), metav1.GetOptions{})
	if err != nil {
		return pki.SecretCertificates{}, fmt.Errorf("getting Secret %s: %w", ref, err)
	}
	leafs, err := certutil.ParseCertsPEM(s.Data[corev1.TLSCertKey])
	if err != nil {
		return pki.SecretCertificates{}, fmt.Errorf("tls.crt of Secret %s: %w", ref, err)
	}
	cas, err := certutil.ParseCertsPEM(s.Data["ca.crt"])
	if err != nil {
		return pki.SecretCertificates{}, fmt.Errorf("ca.crt of Secret %s: %w", ref, err)
	}
	return pki.SecretCertificates{Secret: s, Leaf: leafs[0], CA: cas[0]}, nil
}

// ReadCABundles reads every caBundle of the release: each webhook of its validating and
// mutating configuration and, when the release installs the CRDs, the DGDR conversion webhook.
func ReadCABundles(ctx context.Context, kube kubernetes.Interface, crds apiextensionsclient.Interface, r *chart.Release) (pki.CABundles, error) {
	var conversion []string
	if r.InstallsCRDs() {
		conversion = []string{chart.ConversionCRD}
	}
	return CABundlesOf(ctx, kube, crds, []string{r.ValidatingName()}, []string{r.MutatingName()}, conversion)
}

// CABundlesOf reads the caBundle of every webhook of the named Validating- and
// MutatingWebhookConfigurations and of the named CRDs' conversion webhooks, by place (the keys
// pki.CABundles describes): every place the API server calls an operator through.
func CABundlesOf(ctx context.Context, kube kubernetes.Interface, crds apiextensionsclient.Interface, validating, mutating, conversionCRDs []string) (pki.CABundles, error) {
	out := pki.CABundles{}
	for _, name := range validating {
		vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("getting ValidatingWebhookConfiguration %s: %w", name, err)
		}
		for _, w := range vwc.Webhooks {
			out["ValidatingWebhookConfiguration "+vwc.Name+" webhook "+w.Name] = w.ClientConfig.CABundle
		}
	}
	for _, name := range mutating {
		mwc, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("getting MutatingWebhookConfiguration %s: %w", name, err)
		}
		for _, w := range mwc.Webhooks {
			out["MutatingWebhookConfiguration "+mwc.Name+" webhook "+w.Name] = w.ClientConfig.CABundle
		}
	}
	for _, name := range conversionCRDs {
		crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("getting CustomResourceDefinition %s: %w", name, err)
		}
		var ca []byte
		if c := crd.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig != nil {
			ca = c.Webhook.ClientConfig.CABundle
		}
		out["CustomResourceDefinition "+name+" conversion"] = ca
	}
	return out, nil
}

// WaitCABundles waits until every caBundle of the release contains caPEM, or, with caPEM
// empty, until none is empty.
func WaitCABundles(ctx context.Context, kube kubernetes.Interface, crds apiextensionsclient.Interface, r *chart.Release, caPEM []byte, timeout time.Duration) error {
	what := "every caBundle of " + r.String() + " to be set"
	if len(caPEM) > 0 {
		what = "every caBundle of " + r.String() + " to contain the CA " + pki.DescribePEM(caPEM)
	}
	return poll.Until(ctx, what, timeout, func(ctx context.Context) (bool, string, error) {
		bundles, err := ReadCABundles(ctx, kube, crds, r)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(bundles.Missing(caPEM)) == 0, bundles.DescribeMissing(caPEM), nil
	})
}
