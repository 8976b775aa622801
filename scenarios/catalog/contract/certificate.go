package contract

import (
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// servingCertificate is W2: the Service serves a certificate for <service>.<namespace>.svc, and
// every caBundle that must trust it — each webhook's, each conversion CRD's — verifies it the way
// the API server does (the bundle as roots, the Service host as the name, server auth).
func servingCertificate() e2etypes.Feature {
	var chain []*x509.Certificate
	return features.New("the served certificate names the Service, and every caBundle verifies it").
		WithLabel(suite.LabelScenario, "W2").
		Assess("the Service serves a certificate for <service>.<namespace>.svc", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			var err error
			chain, err = c.ServedCertificates(ctx, it.Namespace, it.Served.Service, it.Served.ServicePort)
			expect.NoError(t, err, "reading the certificate Service %s/%s serves", it.Namespace, it.Served.Service)
			if leaf := chain[0]; !slices.Contains(leaf.DNSNames, it.Served.ServiceHost()) {
				expect.Errorf(t, "the served certificate (subject %s) names %v, not %s: the API server refuses it (x509: certificate is valid for …, not %s)",
					leaf.Subject, leaf.DNSNames, it.Served.ServiceHost(), it.Served.ServiceHost())
			}
			return ctx
		}).
		Assess("every webhook's and conversion CRD's caBundle verifies the served chain", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			if chain == nil {
				expect.Fatalf(t, "no served certificate to verify (the step before failed)")
			}
			bundles, err := caBundles(ctx, c, it)
			expect.NoError(t, err, "reading the caBundles of target %s", it.Target.Name)
			var untrusted []string
			for _, place := range slices.Sorted(maps.Keys(bundles)) {
				if err := pki.VerifyServed(bundles[place], chain, it.Served.ServiceHost()); err != nil {
					untrusted = append(untrusted, fmt.Sprintf("%s: %v", place, err))
				}
			}
			if len(untrusted) > 0 {
				expect.Errorf(t, "the API server would refuse the served certificate (subject %s, issuer %s) through:\n  %s",
					chain[0].Subject, chain[0].Issuer, strings.Join(untrusted, "\n  "))
			}
			return ctx
		}).Feature()
}

// caBundles reads the caBundle of every place the API server calls the target through: each
// webhook of its configurations, each conversion CRD.
func caBundles(ctx context.Context, c *suite.Cluster, it *target.Installed) (map[string][]byte, error) {
	out := map[string][]byte{}
	validating, mutating := it.Served.Configurations()
	for _, name := range validating {
		vwc, err := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("getting ValidatingWebhookConfiguration %s: %w", name, err)
		}
		for _, w := range vwc.Webhooks {
			out["ValidatingWebhookConfiguration "+name+" webhook "+w.Name] = w.ClientConfig.CABundle
		}
	}
	for _, name := range mutating {
		mwc, err := c.Kube().AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("getting MutatingWebhookConfiguration %s: %w", name, err)
		}
		for _, w := range mwc.Webhooks {
			out["MutatingWebhookConfiguration "+name+" webhook "+w.Name] = w.ClientConfig.CABundle
		}
	}
	for _, name := range it.Served.ConversionCRDs {
		crd, err := c.CRDs().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("getting CustomResourceDefinition %s: %w", name, err)
		}
		var ca []byte
		if cv := crd.Spec.Conversion; cv != nil && cv.Webhook != nil && cv.Webhook.ClientConfig != nil {
			ca = cv.Webhook.ClientConfig.CABundle
		}
		out["CustomResourceDefinition "+name+" conversion"] = ca
	}
	return out, nil
}
