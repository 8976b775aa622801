package certmodes

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// unusableSecret is a Secret content the operator must refuse at startup, and the reason it
// is expected to log for it.
type unusableSecret struct {
	name string
	// make returns the planted certificate; host is the Service host, lookAhead the release's.
	make func(host string, lookAhead time.Duration) (*pki.ServingCertificate, error)
	// reason are parts of the operator's log line saying why it regenerated.
	reason func(host string) []string
}

// unusableSecrets are C4's cases: each is otherwise a perfectly good certificate, so the one
// defect is the only reason to regenerate.
var unusableSecrets = []unusableSecret{
	{
		name: "a serving certificate without the Service's DNS name",
		make: func(_ string, _ time.Duration) (*pki.ServingCertificate, error) {
			ca, err := pki.NewCertificateAuthority("gauntlet C4 wrong-SAN CA", 10*365*24*time.Hour)
			if err != nil {
				return nil, err
			}
			return ca.Issue(pki.LeafOptions{DNSNames: []string{"wrong-service.elsewhere.svc"}})
		},
		reason: func(host string) []string { return []string{"not valid for " + host} },
	},
	{
		name: "a serving certificate expiring within the look-ahead",
		make: func(host string, lookAhead time.Duration) (*pki.ServingCertificate, error) {
			ca, err := pki.NewCertificateAuthority("gauntlet C4 CA of an expiring certificate", 10*365*24*time.Hour)
			if err != nil {
				return nil, err
			}
			return ca.Issue(pki.LeafOptions{DNSNames: []string{host}, NotAfter: time.Now().Add(lookAhead / 3)})
		},
		reason: func(string) []string { return []string{"serving certificate expires at", "look-ahead"} },
	},
	{
		name: "a CA expiring within the look-ahead",
		make: func(host string, lookAhead time.Duration) (*pki.ServingCertificate, error) {
			ca, err := pki.NewCertificateAuthority("gauntlet C4 expiring CA", lookAhead/3)
			if err != nil {
				return nil, err
			}
			// The serving certificate itself outlives the look-ahead: only its CA is the problem.
			return ca.Issue(pki.LeafOptions{DNSNames: []string{host}, NotAfter: time.Now().Add(2 * lookAhead)})
		},
		reason: func(string) []string { return []string{"CA certificate", "look-ahead"} },
	},
}

// unusableSecretRegenerated is C4: an operator that starts with a Secret it must not serve —
// wrong SANs, or a certificate or CA expiring within the look-ahead — generates a new CA and
// certificate, injects the new CA and serves the new certificate. The operator is scaled to 0
// while the bad Secret is put in place, so the regeneration happens at startup.
func unusableSecretRegenerated() types.Feature {
	var replicas int32
	f := features.New("a Secret with wrong SANs or expiring within the look-ahead is regenerated at startup").
		WithLabel(suite.LabelScenario, "C4").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		Setup(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			replicas = operatorReplicas(ctx, t, c, r)
			if replicas == 0 {
				expect.Fatalf(t, "Deployment %s/%s: expected at least one replica to restart, saw 0", r.Namespace, r.DeploymentName())
			}
			return ctx
		}))
	for _, bad := range unusableSecrets {
		f = f.Assess("startup with "+bad.name+" regenerates", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			lookAhead := certificateLookAhead(t, r)
			planted, err := bad.make(r.ServiceHost(), lookAhead)
			expect.NoError(t, err, "making %s", bad.name)

			scaleOperator(ctx, t, c, r, 0)
			err = release.ApplySecret(ctx, c.Kube(), pki.ServingSecret(r.Namespace, r.SecretName(), planted, false))
			expect.NoError(t, err, "writing %s into Secret %s/%s", bad.name, r.Namespace, r.SecretName())
			scaleOperator(ctx, t, c, r, replicas)

			after := expectRegenerated(ctx, t, c, r, planted, bad.name)
			expectLogLine(ctx, t, c, r, "saying why the Secret was regenerated", append([]string{r.Namespace + "/" + r.SecretName()}, bad.reason(r.ServiceHost())...)...)
			expectCABundles(ctx, t, c, r, after.Secret.Data["ca.crt"])
			expectServed(ctx, t, c, r, after.Leaf)
			expectAdmission(ctx, t, c, r, "after the regeneration")
			return ctx
		}))
	}
	return f.Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
		// A failed step may have left the operator scaled down; later scenarios need it.
		if replicas > 0 && operatorReplicas(ctx, t, c, r) != replicas {
			scaleOperator(ctx, t, c, r, replicas)
		}
		return ctx
	})).Feature()
}

// expectRegenerated waits until the Secret holds a new CA and a new serving certificate for the
// Service host, chaining to the new CA, instead of what was planted.
func expectRegenerated(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, planted *pki.ServingCertificate, what string) pki.SecretCertificates {
	t.Helper()
	var after pki.SecretCertificates
	desc := fmt.Sprintf("Secret %s/%s to be regenerated (planted: %s, serving %s, CA %s)", r.Namespace, r.SecretName(),
		what, pki.Describe(planted.Leaf), pki.Describe(planted.CA))
	expect.Eventually(ctx, t, desc, convergeTimeout, func(ctx context.Context) (bool, string, error) {
		s, err := release.ReadSecretCertificates(ctx, c.Kube(), r)
		if err != nil {
			return false, err.Error(), nil
		}
		after = s
		seen := fmt.Sprintf("serving %s; CA %s", pki.Describe(s.Leaf), pki.Describe(s.CA))
		return !s.Leaf.Equal(planted.Leaf) && !s.CA.Equal(planted.CA), seen, nil
	})
	if !slices.Contains(after.Leaf.DNSNames, r.ServiceHost()) {
		expect.Errorf(t, "regenerated serving certificate: expected SAN %s, saw SANs %v", r.ServiceHost(), after.Leaf.DNSNames)
	}
	roots := x509.NewCertPool()
	roots.AddCert(after.CA)
	if _, err := after.Leaf.Verify(x509.VerifyOptions{DNSName: r.ServiceHost(), Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		expect.Errorf(t, "regenerated serving certificate: expected it to verify for %s against the new ca.crt, saw %v", r.ServiceHost(), err)
	}
	lookAhead := certificateLookAhead(t, r)
	for _, cert := range []*x509.Certificate{after.Leaf, after.CA} {
		if left := time.Until(cert.NotAfter); left <= lookAhead {
			expect.Errorf(t, "regenerated certificate %s: expected it to outlive the look-ahead of %s, saw it expire in %s", pki.Describe(cert), lookAhead, left.Round(time.Minute))
		}
	}
	return after
}
