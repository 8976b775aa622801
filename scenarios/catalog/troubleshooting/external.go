package troubleshooting

import (
	"context"
	"crypto/x509"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// T4 and T5 are about a certificate the user brings (external mode). The suite's release
// generates its own, so each of them installs a second release in external mode: namespace-
// restricted to the scenario's namespace (it serves that namespace only and holds its Lease,
// so the suite's operator leaves it alone), without CRDs (the suite's release owns them).

// externalRelease is a scenario's own external-mode release and the CA its certificates come
// from (webhook.caBundle trusts it, so only the certificate itself can be wrong).
type externalRelease struct {
	release *chart.Release
	ca      *pki.CertificateAuthority
}

// installExternal installs release name in namespace ns (already created) in external mode
// with a correct serving certificate, and waits until its webhooks answer.
func installExternal(ctx context.Context, t *testing.T, c *suite.Cluster, name, ns string) *externalRelease {
	t.Helper()
	ca, err := pki.NewCertificateAuthority("gauntlet "+name+" external CA", 10*365*24*time.Hour)
	expect.NoError(t, err, "creating the external CA")
	rel := &chart.Release{
		Name:      name,
		Namespace: ns,
		Mode:      chart.External,
		// A release of its own in the scenario's namespace (restricted to it, so the suite's
		// release stays out) with failurePolicy Fail, the cluster-wide default, under which a
		// bad certificate shows as the documented x509 error; a restricted release defaults to
		// Ignore and would admit unvalidated instead.
		Values: map[string]any{
			"namespaceRestriction": map[string]any{"enabled": true},
			"crds":                 map[string]any{"install": false},
			"webhook":              map[string]any{"failurePolicy": "Fail"},
		},
	}
	good, err := ca.Issue(pki.LeafOptions{DNSNames: []string{rel.ServiceHost()}})
	expect.NoError(t, err, "issuing the serving certificate for %s", rel.ServiceHost())
	rel.Serving = good
	expect.NoError(t, c.Installer().Install(ctx, rel), "installing %s", rel)
	expect.NoError(t, c.Installer().WaitReady(ctx, rel, rolloutTimeout), "waiting for %s", rel)
	return &externalRelease{release: rel, ca: ca}
}

// reissue replaces the certificate in the release's Secret, as a user of external mode does
// (`kubectl create secret tls … | kubectl apply`), and waits until the webhook serves it: the
// kubelet refreshes the mounted Secret and the operator reloads the files.
func (e *externalRelease) reissue(ctx context.Context, t *testing.T, c *suite.Cluster, opts pki.LeafOptions) *pki.ServingCertificate {
	t.Helper()
	rel := e.release
	sc, err := e.ca.Issue(opts)
	expect.NoError(t, err, "issuing a serving certificate for %v", opts.DNSNames)
	expect.NoError(t, release.ApplySecret(ctx, c.Kube(), pki.ServingSecret(rel.Namespace, rel.SecretName(), sc, false)),
		"replacing Secret %s/%s", rel.Namespace, rel.SecretName())
	expectServed(ctx, t, c, rel, sc.Leaf)
	return sc
}

// expectServed waits until the release's webhook Service presents want.
func expectServed(ctx context.Context, t *testing.T, c *suite.Cluster, rel *chart.Release, want *x509.Certificate) {
	t.Helper()
	what := fmt.Sprintf("Service %s/%s to serve the new certificate (%s)", rel.Namespace, rel.ServiceName(), pki.Describe(want))
	expect.Eventually(ctx, t, what, secretVolumeTimeout, func(ctx context.Context) (bool, string, error) {
		chain, err := c.ServedCertificates(ctx, rel.Namespace, rel.ServiceName(), 443)
		if err != nil {
			return false, err.Error(), nil
		}
		return chain[0].Equal(want), "served " + pki.Describe(chain[0]).String(), nil
	})
}

// uninstallExternal removes a scenario's release (its namespace goes with the scenario).
func uninstallExternal(ctx context.Context, t *testing.T, c *suite.Cluster, e *externalRelease) {
	t.Helper()
	if e == nil {
		return
	}
	if err := c.Installer().Uninstall(ctx, e.release, release.UninstallOptions{}); err != nil {
		expect.Errorf(t, "uninstalling %s: %v", e.release, err)
		return
	}
	// The restricted operator deletes its Lease when it stops — unless `helm uninstall` took
	// its RBAC away first. Worth knowing: the cluster-wide operator then skips the namespace
	// until the Lease expires.
	ns := e.release.Namespace
	if l, err := c.Kube().CoordinationV1().Leases(ns).Get(ctx, namespaceLease, metav1.GetOptions{}); err == nil {
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		t.Logf("Lease %s/%s (holder %q) outlived helm uninstall of %s", ns, namespaceLease, holder, e.release)
	}
}

// namespaceLease is the Lease a namespace-restricted operator holds in its namespace.
const namespaceLease = "dynamo-operator-ns-lock"

// externalCertificateFault is the shape of T4 and T5: a correct install, then a certificate
// with one defect, the API server's error, the doctor, a correct certificate again.
type externalCertificateFault struct {
	id, prefix, title string
	// defect describes the bad certificate, for step names.
	defect string
	// bad is the certificate with the defect, for the release's Service host.
	bad func(host string) pki.LeafOptions
	// symptom is the stable part of the API server's error for host.
	symptom func(host string) []*regexp.Regexp
	// check is the doctor check that must be the one root cause.
	check string
}

func (f externalCertificateFault) feature() e2etypes.Feature {
	var ns string
	var ext *externalRelease
	// The final check looks at the suite's release from "default": the scenario namespace is
	// about to be deleted, and a Lease the restricted operator left there would keep the
	// cluster-wide operator out of it until it expires.
	var suiteTestNamespace string
	return features.New(f.title).
		WithLabel(suite.LabelScenario, f.id).
		Setup(baseline(f.prefix, &ns)).
		Assess("an external-mode release with a correct certificate admits and denies as it should", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			ext = installExternal(ctx, t, c, f.prefix, ns)
			expectDenied(ctx, t, c, ns, "invalid")
			expectDoctorHealthy(ctx, t, c, targetOf(ext.release, ""), healthyTimeout)
			return ctx
		}).
		Assess("fault: the Secret re-issued with "+f.defect+", and the operator restarted", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			ext.reissue(ctx, t, c, f.bad(ext.release.ServiceHost()))
			// The API server keeps using the TLS connections it verified before the change;
			// only new connections meet the new certificate. A restart closes them, as any
			// later restart of the operator would.
			expect.NoError(t, rolloutRestart(ctx, c, ext.release), "restarting %s", ext.release)
			return ctx
		}).
		Assess("symptom: the API server refuses the served certificate", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			parts := append([]*regexp.Regexp{failedCallPrefix}, f.symptom(ext.release.ServiceHost())...)
			expectCreateFailsWith(ctx, t, suite.ClusterFrom(ctx, t), ns, parts...)
			return ctx
		}).
		Assess(fmt.Sprintf("the doctor names %s (%s) as the one root cause", f.id, f.check), func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			expectDoctorNames(ctx, t, c, targetOf(ext.release, ""), f.id, f.check)
			return ctx
		}).
		Assess("fix: re-issue the certificate for <svc>.<ns>.svc, valid now; admission works again", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := suite.ClusterFrom(ctx, t)
			ext.reissue(ctx, t, c, pki.LeafOptions{DNSNames: []string{ext.release.ServiceHost()}})
			expect.NoError(t, release.WaitAdmission(ctx, c.Dynamic(), ext.release, admissionTimeout), "admission after re-issuing")
			expectDenied(ctx, t, c, ns, "invalid")
			expectDoctorHealthy(ctx, t, c, targetOf(ext.release, ""), healthyTimeout)
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			uninstallExternal(ctx, t, suite.ClusterFrom(ctx, t), ext)
			return ctx
		}).
		Teardown(restored(&suiteTestNamespace)).
		Feature()
}

// wrongSAN is T4: a serving certificate without <svc>.<ns>.svc among its names.
func wrongSAN() e2etypes.Feature {
	return externalCertificateFault{
		id: "T4", prefix: "t4",
		title:  "serving certificate without <svc>.<ns>.svc (external mode): x509 valid for …, not <svc>.<ns>.svc until re-issued",
		defect: "the Service's short names only (no <svc>.<ns>.svc)",
		bad: func(host string) pki.LeafOptions {
			// What a user writes who forgets the .svc suffix: <svc> and <svc>.<ns>.
			short := strings.TrimSuffix(host, ".svc")
			svc, _, _ := strings.Cut(short, ".")
			return pki.LeafOptions{DNSNames: []string{svc, short}}
		},
		symptom: func(host string) []*regexp.Regexp {
			return []*regexp.Regexp{quoted("x509: certificate is valid for "), quoted(", not " + host)}
		},
		check: "certificate-secret",
	}.feature()
}

// expiredCertificate is T5: a serving certificate whose validity ended.
func expiredCertificate() e2etypes.Feature {
	return externalCertificateFault{
		id: "T5", prefix: "t5",
		title:  "serving certificate expired (external mode): x509 expired or not yet valid until re-issued",
		defect: "a certificate that expired yesterday",
		bad: func(host string) pki.LeafOptions {
			now := time.Now()
			return pki.LeafOptions{DNSNames: []string{host}, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)}
		},
		symptom: func(string) []*regexp.Regexp {
			return []*regexp.Regexp{quoted("x509: certificate has expired or is not yet valid")}
		},
		check: "certificate-secret",
	}.feature()
}
