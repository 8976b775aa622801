package certmodes

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	apiutil "github.com/cert-manager/cert-manager/pkg/api/util"
	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// issuanceTimeout covers cert-manager issuing a certificate (key, request, approval, signing,
// Secret), cainjector copying its CA and the kubelet updating the mounted Secret.
const issuanceTimeout = 3 * time.Minute

// Renewal load of C8: dry-run creates per second, and how long the load runs before the
// renewal is triggered and after the new certificate is served.
const (
	renewalLoadRate   = 20
	renewalLoadBefore = 3 * time.Second
	renewalLoadAfter  = 5 * time.Second
)

// chartIssuer is the CA Issuer the chart renders when webhook.certManager.issuerRef.name is
// empty, and chartCASecret the Secret of its CA (templates/certmanager.yaml).
func chartIssuer(r *chart.Release) chart.IssuerRef {
	return chart.IssuerRef{Kind: cmv1.IssuerKind, Name: r.Name + "-webhook-ca-issuer"}
}

func chartCASecret(r *chart.Release) string { return r.Name + "-webhook-ca" }

func certManagerClient(t *testing.T, c *suite.Cluster) cmclient.Interface {
	t.Helper()
	cm, err := cmclient.NewForConfig(c.RESTConfig())
	expect.NoError(t, err, "building a cert-manager client")
	return cm
}

// certManagerIssuance is C7: in cert-manager mode the chart's Certificate, signed through the
// issuer its issuerRef names, fills the Secret the operator serves, and cainjector puts the
// issuer's CA into every caBundle (validating, mutating, DGDR conversion). It checks the chart's
// own CA chain (the default), then an Issuer and a ClusterIssuer named in issuerRef by
// `helm upgrade`, and restores the release afterwards.
func certManagerIssuance() types.Feature {
	var created []chart.IssuerRef
	suffix := rand.String(5)
	f := features.New("cert-manager: Issuer → Certificate → Secret, cainjector fills every caBundle, issuerRef honored").
		WithLabel(suite.LabelScenario, "C7").
		WithLabel(suite.LabelCertMode, string(chart.CertManager)).
		Assess("the chart's chain: self-signed Issuer → CA → CA Issuer → serving Certificate → Secret", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			if r.IssuerRef.Name != "" {
				expect.Skipf(t, "%s names issuer %s %s; the chart's own chain is not rendered", r, r.IssuerRef.Kind, r.IssuerRef.Name)
			}
			ca, err := c.Kube().CoreV1().Secrets(r.Namespace).Get(ctx, chartCASecret(r), metav1.GetOptions{})
			expect.NoError(t, err, "getting the chart's CA Secret %s/%s", r.Namespace, chartCASecret(r))
			cas, err := certutil.ParseCertsPEM(ca.Data["tls.crt"])
			expect.NoError(t, err, "parsing tls.crt of the chart's CA Secret %s/%s", r.Namespace, chartCASecret(r))
			if root := cas[0]; !root.IsCA || root.CheckSignatureFrom(root) != nil {
				expect.Errorf(t, "Secret %s/%s: expected a self-signed CA (issued by the chart's self-signed Issuer), saw %s", r.Namespace, chartCASecret(r), pki.Describe(root))
			}
			expectIssuedBy(ctx, t, c, r, chartIssuer(r), ca.Data["tls.crt"])
			return ctx
		}))
	for _, kind := range []string{cmv1.IssuerKind, cmv1.ClusterIssuerKind} {
		f = f.Assess("issuerRef kind "+kind+": helm upgrade re-issues the Secret from that issuer", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			cmNamespace, ok := c.CertManagerNamespace()
			if !ok {
				expect.Fatalf(t, "expected a cluster with cert-manager for %s, saw none", r)
			}
			ref := chart.IssuerRef{Kind: kind, Name: "c7-" + strings.ToLower(kind) + "-" + suffix}
			created = append(created, ref)
			issuer, err := release.CreateCAIssuer(ctx, c.RESTConfig(), ref, r.Namespace, cmNamespace, issuanceTimeout)
			expect.NoError(t, err, "creating CA %s %s", kind, ref.Name)
			previous := mustReadSecret(ctx, t, c, r)

			upgraded := *r
			upgraded.IssuerRef = ref
			expect.NoError(t, c.Installer().Upgrade(ctx, &upgraded), "helm upgrade with webhook.certManager.issuerRef %s/%s", kind, ref.Name)
			expectIssuedBy(ctx, t, c, r, ref, issuer.CAPEM)
			prevCA := previous.Secret.Data["ca.crt"]
			expectCABundlesHold(ctx, t, c, r, prevCA, "the previous CA "+pki.DescribePEM(prevCA)+
				" next to the new one (cainjector merges CAs, so pods still serving the previous certificate stay trusted while switching issuers)")
			return ctx
		}))
	}
	return f.Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
		restored := *r
		expect.NoError(t, c.Installer().Upgrade(ctx, &restored), "restoring %s with helm upgrade", r)
		expect.NoError(t, release.WaitAdmission(ctx, c.Dynamic(), r, issuanceTimeout), "admission after restoring %s", r)
		if r.IssuerRef.Name == "" {
			ca, err := c.Kube().CoreV1().Secrets(r.Namespace).Get(ctx, chartCASecret(r), metav1.GetOptions{})
			expect.NoError(t, err, "getting the chart's CA Secret %s/%s", r.Namespace, chartCASecret(r))
			expectSecretSignedBy(ctx, t, c, r, ca.Data["tls.crt"])
		}
		cmNamespace, _ := c.CertManagerNamespace()
		for _, ref := range created {
			deleteCAIssuer(ctx, t, c, ref, r.Namespace, cmNamespace)
		}
		return ctx
	})).Feature()
}

// expectIssuedBy checks the whole path a user follows in cert-manager mode: the Certificate
// names ref and the release's Secret, is Ready, the Secret's certificate is signed by caPEM for
// the Service host, every caBundle holds caPEM, the operator serves the Secret's certificate and
// admission works.
func expectIssuedBy(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, ref chart.IssuerRef, caPEM []byte) {
	t.Helper()
	cm := certManagerClient(t, c)
	name := r.ServingCertificateName()
	expect.Eventually(ctx, t, fmt.Sprintf("Certificate %s/%s to name issuer %s %s and be Ready", r.Namespace, name, ref.Kind, ref.Name), issuanceTimeout,
		func(ctx context.Context) (bool, string, error) {
			crt, err := cm.CertmanagerV1().Certificates(r.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			ir := crt.Spec.IssuerRef
			seen := fmt.Sprintf("issuerRef %s %s (group %s), %s", ir.Kind, ir.Name, ir.Group, certmanager.ReadyState(crt))
			return ir.Kind == ref.Kind && ir.Name == ref.Name && apiutil.CertificateHasCondition(crt, cmv1.CertificateCondition{Type: cmv1.CertificateConditionReady, Status: cmmeta.ConditionTrue}), seen, nil
		})
	crt, err := cm.CertmanagerV1().Certificates(r.Namespace).Get(ctx, name, metav1.GetOptions{})
	expect.NoError(t, err, "getting Certificate %s/%s", r.Namespace, name)
	expect.Equal(t, "spec.secretName of Certificate "+r.Namespace+"/"+name, r.SecretName(), crt.Spec.SecretName)
	if !slices.Contains(crt.Spec.DNSNames, r.ServiceHost()) {
		expect.Errorf(t, "Certificate %s/%s: expected dnsName %s, saw %v", r.Namespace, name, r.ServiceHost(), crt.Spec.DNSNames)
	}
	leaf := expectSecretSignedBy(ctx, t, c, r, caPEM)
	expectCABundles(ctx, t, c, r, caPEM)
	expectServedWithin(ctx, t, c, r, leaf, issuanceTimeout)
	expectAdmission(ctx, t, c, r, "with issuer "+ref.Kind+" "+ref.Name)
}

// expectSecretSignedBy waits until the Secret's serving certificate is signed by caPEM and
// valid for the Service host, and returns it.
func expectSecretSignedBy(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, caPEM []byte) *x509.Certificate {
	t.Helper()
	cas, err := certutil.ParseCertsPEM(caPEM)
	expect.NoError(t, err, "parsing the issuer's CA")
	roots := x509.NewCertPool()
	for _, ca := range cas {
		roots.AddCert(ca)
	}
	var leaf *x509.Certificate
	what := fmt.Sprintf("Secret %s/%s to hold a certificate for %s signed by %s", r.Namespace, r.SecretName(), r.ServiceHost(), pki.DescribePEM(caPEM))
	expect.Eventually(ctx, t, what, issuanceTimeout, func(ctx context.Context) (bool, string, error) {
		s, err := release.ReadSecretCertificates(ctx, c.Kube(), r)
		if err != nil {
			return false, err.Error(), nil
		}
		leaf = s.Leaf
		_, err = s.Leaf.Verify(x509.VerifyOptions{DNSName: r.ServiceHost(), Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if err != nil {
			return false, fmt.Sprintf("%s: %v", pki.Describe(s.Leaf), err), nil
		}
		return true, "", nil
	})
	return leaf
}

// deleteCAIssuer removes what release.CreateCAIssuer made: the issuer, its self-signed
// bootstrap issuer, the CA Certificate and its Secret.
func deleteCAIssuer(ctx context.Context, t *testing.T, c *suite.Cluster, ref chart.IssuerRef, namespace, cmNamespace string) {
	t.Helper()
	cm := certManagerClient(t, c)
	ignore := func(err error, doing string) {
		if err != nil && !apierrors.IsNotFound(err) {
			expect.Errorf(t, "%s: %v", doing, err)
		}
	}
	secretNS := namespace
	if ref.Kind == cmv1.ClusterIssuerKind {
		secretNS = cmNamespace
		for _, name := range []string{ref.Name, ref.Name + "-selfsigned"} {
			ignore(cm.CertmanagerV1().ClusterIssuers().Delete(ctx, name, metav1.DeleteOptions{}), "deleting ClusterIssuer "+name)
		}
	} else {
		for _, name := range []string{ref.Name, ref.Name + "-selfsigned"} {
			ignore(cm.CertmanagerV1().Issuers(namespace).Delete(ctx, name, metav1.DeleteOptions{}), "deleting Issuer "+namespace+"/"+name)
		}
	}
	ca := ref.Name + "-ca"
	ignore(cm.CertmanagerV1().Certificates(secretNS).Delete(ctx, ca, metav1.DeleteOptions{}), "deleting Certificate "+secretNS+"/"+ca)
	ignore(c.Kube().CoreV1().Secrets(secretNS).Delete(ctx, ca, metav1.DeleteOptions{}), "deleting Secret "+secretNS+"/"+ca)
}

// certManagerRenewal is C8: when cert-manager renews the serving certificate (here triggered
// the way `cmctl renew` does, by setting the Certificate's Issuing condition), the operator
// serves the new certificate without a pod restart, and a constant admission load running
// through the renewal sees no failure.
func certManagerRenewal() types.Feature {
	var ns string
	var before pki.SecretCertificates
	var pods podGeneration
	var revision int
	return features.New("cert-manager: leaf renewal is served without a restart and without failed admissions").
		WithLabel(suite.LabelScenario, "C8").
		WithLabel(suite.LabelCertMode, string(chart.CertManager)).
		Setup(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			ns = suite.Namespace(ctx, t, "c8")
			expect.NoError(t, certmanager.WaitObjectReady(ctx, c.RESTConfig(), cmv1.CertificateKind, r.Namespace, r.ServingCertificateName(), issuanceTimeout), "before the renewal")
			expectAdmission(ctx, t, c, r, "before the renewal")
			before = mustReadSecret(ctx, t, c, r)
			// The Secret may have just changed (C7 ends by restoring the chart's issuer): the
			// running pod sees it once the kubelet refreshes the mounted volume.
			expectServedWithin(ctx, t, c, r, before.Leaf, issuanceTimeout)
			pods = snapshotPods(ctx, t, c, r)
			crt, err := certManagerClient(t, c).CertmanagerV1().Certificates(r.Namespace).Get(ctx, r.ServingCertificateName(), metav1.GetOptions{})
			expect.NoError(t, err, "getting Certificate %s/%s", r.Namespace, r.ServingCertificateName())
			if crt.Status.Revision != nil {
				revision = *crt.Status.Revision
			}
			return ctx
		})).
		Assess(fmt.Sprintf("a renewal under %d dry-run creates per second fails none of them", renewalLoadRate), suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			load := startAdmissionLoad(ctx, c, ns, renewalLoadRate)
			defer load.ExpectNoFailures(ctx, t, "through the renewal")
			_ = poll.Sleep(ctx, "the admission load to be answered before the renewal", renewalLoadBefore)
			if sent, _ := load.Counts(); sent == 0 {
				expect.Fatalf(t, "admission load: expected answers within %s, saw none (%s)", renewalLoadBefore, load)
			}

			triggered := time.Now()
			triggerRenewal(ctx, t, c, r, "C8")
			var renewed pki.SecretCertificates
			what := fmt.Sprintf("Secret %s/%s to hold a renewed certificate (old serial %s)", r.Namespace, r.SecretName(), pki.SerialHex(before.Leaf))
			expect.Eventually(ctx, t, what, issuanceTimeout, func(ctx context.Context) (bool, string, error) {
				s, err := release.ReadSecretCertificates(ctx, c.Kube(), r)
				if err != nil {
					return false, err.Error(), nil
				}
				renewed = s
				return !s.Leaf.Equal(before.Leaf), "still " + pki.Describe(s.Leaf).String(), nil
			})
			issued := time.Since(triggered)
			expectServedWithin(ctx, t, c, r, renewed.Leaf, issuanceTimeout)
			served := time.Since(triggered)
			suite.Note(ctx, t, "issuedSeconds", issued.Seconds())
			suite.Note(ctx, t, "servedSeconds", served.Seconds())
			suite.Note(ctx, t, "servedSerial", pki.SerialHex(renewed.Leaf))
			if !renewed.CA.Equal(before.CA) {
				expect.Errorf(t, "renewal: expected the same CA (the chart's chain renews only the leaf), saw CA %s instead of %s", pki.Describe(renewed.CA), pki.Describe(before.CA))
			}
			_ = poll.Sleep(ctx, "the admission load to run on past the renewed certificate being served", renewalLoadAfter)
			return ctx
		})).
		Assess("the Certificate is Ready at the next revision and no operator pod restarted", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expect.NoError(t, certmanager.WaitObjectReady(ctx, c.RESTConfig(), cmv1.CertificateKind, r.Namespace, r.ServingCertificateName(), issuanceTimeout), "after the renewal")
			crt, err := certManagerClient(t, c).CertmanagerV1().Certificates(r.Namespace).Get(ctx, r.ServingCertificateName(), metav1.GetOptions{})
			expect.NoError(t, err, "getting Certificate %s/%s", r.Namespace, r.ServingCertificateName())
			if crt.Status.Revision == nil || *crt.Status.Revision <= revision {
				expect.Errorf(t, "Certificate %s/%s: expected status.revision above %d after the renewal, saw %v", r.Namespace, crt.Name, revision, deref(crt.Status.Revision))
			}
			expectSamePods(ctx, t, c, r, pods, "after the renewal")
			return ctx
		})).
		Feature()
}

// triggerRenewal renews the release's serving Certificate as `cmctl renew` does
// (certmanager.Renew); by names the scenario in the Issuing condition's message.
func triggerRenewal(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, by string) {
	t.Helper()
	expect.NoError(t, certmanager.Renew(ctx, c.RESTConfig(), r.Namespace, r.ServingCertificateName(), "gauntlet "+by), "renewing the serving certificate of %s", r)
}

// waitIssued waits until cert-manager has finished an issuance of the release's serving
// Certificate at a revision above after (certmanager.WaitIssued) and returns that revision.
func waitIssued(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, after int) int {
	t.Helper()
	revision, err := certmanager.WaitIssued(ctx, c.RESTConfig(), r.Namespace, r.ServingCertificateName(), after, issuanceTimeout)
	expect.NoError(t, err, "the serving certificate of %s", r)
	return revision
}

func deref(p *int) any {
	if p == nil {
		return "none"
	}
	return *p
}
