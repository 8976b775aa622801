package contract

import (
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
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
			refused, err := untrusted(ctx, c, it, chain)
			expect.NoError(t, err, "reading the caBundles of target %s", it.Target.Name)
			if len(refused) > 0 {
				expect.Errorf(t, "the API server would refuse the served certificate (subject %s, issuer %s) through:\n  %s",
					chain[0].Subject, chain[0].Issuer, strings.Join(refused, "\n  "))
			}
			return ctx
		}).Feature()
}

// untrusted lists every caBundle of it — each webhook's, each conversion CRD's — that does not
// verify chain the way the API server does, as "<where>: <why>"; none when all of them do.
func untrusted(ctx context.Context, c *suite.Cluster, it *target.Installed, chain []*x509.Certificate) ([]string, error) {
	validating, mutating := it.Served.Configurations()
	bundles, err := release.CABundlesOf(ctx, c.Kube(), c.CRDs(), validating, mutating, it.Served.ConversionCRDs)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, place := range slices.Sorted(maps.Keys(bundles)) {
		if err := pki.VerifyServed(bundles[place], chain, it.Served.ServiceHost()); err != nil {
			out = append(out, fmt.Sprintf("%s: %v", place, err))
		}
	}
	return out, nil
}
