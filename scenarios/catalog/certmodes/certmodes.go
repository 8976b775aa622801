// Package certmodes holds the certificate-mode scenarios (CATALOG.md §C) as e2e-framework
// features. Each feature is labelled scenario=<ID> and certmode=<mode>, so a suite runs the ones
// for the mode its release is installed in. They assert what a user sees: the Secret, the
// served certificate, the caBundles the API server uses, and admission working.
package certmodes

import (
	"context"
	"crypto/x509"
	"fmt"
	"testing"
	"time"

	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// Features are every certificate-mode scenario, C1–C12, and P3 and P4 (rotations and rollout
// restarts under load). Each carries the certmode label of the mode(s) it holds in, so a suite
// runs only its own mode's scenarios.
func Features() []types.Feature {
	return []types.Feature{
		freshInstall(),
		restartKeepsCertificate(),
		deletedSecretRegenerated(),
		unusableSecretRegenerated(),
		caFollowedAtRuntime(),
		noStartupRace(),
		servingOrder(),
		certManagerIssuance(),
		certManagerRenewal(),
		externalSecretServed(),
		olmMountServed(),
		oneWriter(),
		rotationsUnderLoad(), // P3
		restartsUnderLoad(),  // P4
	}
}

// Timeouts for what the operator and the API server do after a change.
const (
	rolloutTimeout   = 2 * time.Minute
	convergeTimeout  = time.Minute
	admissionTimeout = time.Minute
)

func mustReadSecret(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) pki.SecretCertificates {
	t.Helper()
	s, err := release.ReadSecretCertificates(ctx, c.Kube(), r)
	expect.NoError(t, err, "reading the certificate Secret of %s", r)
	return s
}

// servedLeaf is the certificate the operator presents through the webhook Service.
func servedLeaf(ctx context.Context, c *suite.Cluster, r *chart.Release) (*x509.Certificate, error) {
	chain, err := c.ServedCertificates(ctx, r.Namespace, r.ServiceName(), 443)
	if err != nil {
		return nil, err
	}
	return chain[0], nil
}

// expectServed waits until the webhook Service presents the certificate with serial want.
func expectServed(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, want *x509.Certificate) {
	t.Helper()
	expectServedWithin(ctx, t, c, r, want, convergeTimeout)
}

// expectServedWithin is expectServed with a timeout, for changes that reach the operator
// through a mounted Secret volume (the kubelet refreshes those periodically, up to a minute
// or more on real nodes).
func expectServedWithin(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, want *x509.Certificate, timeout time.Duration) {
	t.Helper()
	what := fmt.Sprintf("Service %s/%s to serve the Secret's certificate (serial %s)", r.Namespace, r.ServiceName(), pki.SerialHex(want))
	expect.Eventually(ctx, t, what, timeout, func(ctx context.Context) (bool, string, error) {
		got, err := servedLeaf(ctx, c, r)
		if err != nil {
			return false, err.Error(), nil
		}
		return got.Equal(want), "served " + pki.Describe(got).String(), nil
	})
}

// expectCABundles waits until every caBundle of the release (each webhook and the DGDR
// conversion) contains caPEM.
func expectCABundles(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, caPEM []byte) {
	t.Helper()
	expectCABundlesHold(ctx, t, c, r, caPEM, "ca.crt of Secret "+r.SecretName()+", "+pki.DescribePEM(caPEM))
}

// expectCABundlesHold waits until every caBundle of the release contains caPEM; what describes
// that CA and why it must be there, for the failure message.
func expectCABundlesHold(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, caPEM []byte, what string) {
	t.Helper()
	what = fmt.Sprintf("every caBundle of %s (validating, mutating, DGDR conversion) to contain %s", r, what)
	expect.Eventually(ctx, t, what, convergeTimeout, func(ctx context.Context) (bool, string, error) {
		bundles, err := release.ReadCABundles(ctx, c.Kube(), c.CRDs(), r)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(bundles.Missing(caPEM)) == 0, bundles.DescribeMissing(caPEM), nil
	})
}

// operatorPodUIDs lists the UIDs of the release's operator pods.
func operatorPodUIDs(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) map[k8stypes.UID]bool {
	t.Helper()
	uids, err := release.OperatorPodUIDs(ctx, c.Kube(), r)
	expect.NoError(t, err, "listing the operator pods")
	return uids
}

// restartOperator does `kubectl rollout restart` and waits until no pod of before is left and
// the Deployment is Available again.
func restartOperator(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, before map[k8stypes.UID]bool) {
	t.Helper()
	expect.NoError(t, release.RolloutRestart(ctx, c.Kube(), r.Namespace, r.DeploymentName()), "rollout restart")
	expect.Eventually(ctx, t, "the restarted Deployment "+r.DeploymentName()+" to replace its pods", rolloutTimeout, release.PodsReplaced(c.Kube(), r, before))
	expect.NoError(t, release.WaitDeploymentAvailable(ctx, c.Kube(), r.Namespace, r.DeploymentName(), rolloutTimeout), "waiting for the restarted operator")
}
