package certmodes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// startupRestarts is how many consecutive rollout restarts C6 makes. A race that loses one
// time in a few shows up here; the whole loop stays well under a minute on a local cluster.
const startupRestarts = 5

// noStartupRace is C6: the operator becomes ready only once it serves a certificate the API
// server trusts, so the first admission after `kubectl rollout status` reports the Deployment
// Available succeeds — every time, across several consecutive restarts. The admission is made
// once, without retrying: a retry would hide exactly the race this looks for.
func noStartupRace() types.Feature {
	return features.New("no startup race: the first admission after each rollout succeeds").
		WithLabel(suite.LabelScenario, "C6").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		Assess(fmt.Sprintf("%d consecutive rollout restarts, one admission right after each", startupRestarts), suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectAdmission(ctx, t, c, r, "before the restarts")
			var failures, rollouts []string
			for i := 1; i <= startupRestarts; i++ {
				start := time.Now()
				expect.NoError(t, release.RolloutRestart(ctx, c.Kube(), r.Namespace, r.DeploymentName()), "rollout restart #%d", i)
				err := release.WaitDeploymentAvailable(ctx, c.Kube(), r.Namespace, r.DeploymentName(), rolloutTimeout)
				expect.NoError(t, err, "waiting for rollout #%d", i)
				available := time.Since(start)
				if err := firstAdmission(ctx, c, r); err != nil {
					failures = append(failures, fmt.Sprintf("restart #%d (Available after %.1fs): %v", i, available.Seconds(), err))
				}
				rollouts = append(rollouts, fmt.Sprintf("%.1fs", available.Seconds()))
				// The next restart starts from one running pod: a pod of an earlier rollout still
				// shutting down would close the API server's idle connection to it under the next
				// first admission (EOF) — a rolling-restart race P4 measures, not a startup race.
				expect.NoError(t, release.WaitOldPodsGone(ctx, c.Kube(), r, rolloutTimeout), "waiting for the pods replaced by rollout #%d to be gone", i)
			}
			suite.Note(ctx, t, "restarts", startupRestarts)
			suite.Note(ctx, t, "availableAfter", strings.Join(rollouts, " "))
			suite.Note(ctx, t, "failedFirstAdmissions", len(failures))
			if len(failures) > 0 {
				expect.Errorf(t, "expected the first admission after each of %d rollouts to succeed, saw %d fail: %s",
					startupRestarts, len(failures), strings.Join(failures, "; "))
			}
			return ctx
		})).
		Feature()
}

// firstAdmission is one round trip through both webhooks, without retrying: a dry-run create
// of an invalid DynamoGraphDeployment must be denied by the validating webhook, and a valid one
// must come back stamped by the mutating webhook.
func firstAdmission(ctx context.Context, c *suite.Cluster, r *chart.Release) error {
	ns := r.WebhookNamespace()
	name := "c6-probe-" + rand.String(5)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	graphs := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns)
	denied := dynamo.DeniedBy(dynamo.GraphDeploymentValidatingWebhook)
	_, err := graphs.Create(ctx, dynamo.InvalidGraphDeployment(ns, name), dry)
	switch {
	case err == nil:
		return fmt.Errorf("dry-run create of invalid DynamoGraphDeployment %s/%s: expected a denial containing %q, saw it admitted", ns, name, denied)
	case !strings.Contains(err.Error(), denied):
		return fmt.Errorf("dry-run create of invalid DynamoGraphDeployment %s/%s: expected a denial containing %q, saw %v", ns, name, denied, err)
	}
	got, err := graphs.Create(ctx, dynamo.GraphDeployment(ns, name), dry)
	if err != nil {
		return fmt.Errorf("dry-run create of DynamoGraphDeployment %s/%s: expected it admitted, saw %v", ns, name, err)
	}
	if _, ok := got.GetAnnotations()[dynamo.OriginVersionAnnotation]; !ok {
		return fmt.Errorf("dry-run create of DynamoGraphDeployment %s/%s: expected annotation %s from the mutating webhook, saw annotations %v",
			ns, name, dynamo.OriginVersionAnnotation, got.GetAnnotations())
	}
	return nil
}
