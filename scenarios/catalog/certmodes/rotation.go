package certmodes

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// caFollowedAtRuntime is C5: replacing the Secret with another CA and certificate while the
// operator runs (what a CA rotation by hand, or a restore from backup, does) makes every
// caBundle follow and the new certificate served, without restarting any operator pod.
//
// The caBundles must follow within half the check interval: the operator re-checks everything
// every webhook.checkInterval anyway, so only a reaction to the Secret change itself meets that
// deadline, and a user replacing a CA should not wait for the periodic check while admission
// fails.
func caFollowedAtRuntime() types.Feature {
	var pods podGeneration
	var replacement *pki.ServingCertificate
	var replacedAt time.Time
	return features.New("CA changed at runtime: caBundles and the served certificate follow without a restart").
		WithLabel(suite.LabelScenario, "C5").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		Setup(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectAdmission(ctx, t, c, r, "before the CA change")
			pods = snapshotPods(ctx, t, c, r)
			ca, err := pki.NewCertificateAuthority("gauntlet C5 replacement CA", 10*365*24*time.Hour)
			expect.NoError(t, err, "creating the replacement CA")
			svc := r.ServiceName()
			replacement, err = ca.Issue(pki.LeafOptions{DNSNames: []string{svc, svc + "." + r.Namespace, r.ServiceHost(), r.ServiceHost() + ".cluster.local"}})
			expect.NoError(t, err, "issuing the replacement serving certificate")
			return ctx
		})).
		Assess("kubectl replace of the Secret with a new CA and certificate", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			secrets := c.Kube().CoreV1().Secrets(r.Namespace)
			s, err := secrets.Get(ctx, r.SecretName(), metav1.GetOptions{})
			expect.NoError(t, err, "getting Secret %s/%s", r.Namespace, r.SecretName())
			s.Data = pki.ServingSecret(r.Namespace, r.SecretName(), replacement, false).Data
			_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
			expect.NoError(t, err, "replacing Secret %s/%s", r.Namespace, r.SecretName())
			replacedAt = time.Now()
			return ctx
		})).
		Assess("every caBundle holds the new CA before the periodic re-check would", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			interval := checkInterval(t, r)
			deadline := interval / 2
			what := fmt.Sprintf("every caBundle of %s (validating, mutating, DGDR conversion) to contain the replacement CA %s within %s of the Secret change "+
				"(the operator re-checks only every %s, so it must react to the change itself)", r, pki.DescribePEM(replacement.CAPEM), deadline, interval)
			expect.Eventually(ctx, t, what, max(time.Until(replacedAt.Add(deadline)), time.Second), func(ctx context.Context) (bool, string, error) {
				bundles, err := release.ReadCABundles(ctx, c.Kube(), c.CRDs(), r)
				if err != nil {
					return false, err.Error(), nil
				}
				return len(bundles.Missing(replacement.CAPEM)) == 0, bundles.DescribeMissing(replacement.CAPEM), nil
			})
			suite.Note(ctx, t, "caBundlesFollowedSeconds", time.Since(replacedAt).Seconds())
			return ctx
		})).
		Assess("the webhook Service serves the replacement certificate", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectServed(ctx, t, c, r, replacement.Leaf)
			suite.Note(ctx, t, "servedSeconds", time.Since(replacedAt).Seconds())
			return ctx
		})).
		Assess("the operator kept the replacement instead of regenerating", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			s := mustReadSecret(ctx, t, c, r)
			if !s.Leaf.Equal(replacement.Leaf) || !s.CA.Equal(replacement.CA) {
				expect.Errorf(t, "Secret %s/%s after the change: expected the replacement (serving serial %s, CA serial %s), saw %s",
					r.Namespace, r.SecretName(), pki.SerialHex(replacement.Leaf), pki.SerialHex(replacement.CA), s)
			}
			return ctx
		})).
		Assess("no operator pod was restarted and admission works", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectAdmission(ctx, t, c, r, "after the CA change")
			expectSamePods(ctx, t, c, r, pods, "after the CA change")
			return ctx
		})).
		Feature()
}
