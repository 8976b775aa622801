package contract

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// failurePolicyWhileDown is W12: with the target's Deployment scaled to zero, each webhook's
// probe meets the failurePolicy its chart documents — Fail: the API server refuses it with
// `failed calling webhook "<name>"`; Ignore: it is admitted without the webhook's judgement (a
// denied probe admitted, a mutating probe without its patch). What users were promised for an
// outage is what they get. The Deployment is scaled back and every webhook answers again
// before the check ends, failed or not.
func failurePolicyWhileDown() e2etypes.Feature {
	var ns string
	return features.New("while no pod serves the webhooks, each probe meets the failurePolicy the chart documents").
		WithLabel(suite.LabelScenario, "W12").
		Setup(suite.NamespaceSetup(&ns, "w12")).
		Assess("the Deployment scaled to 0: Fail refuses with the API server's failed call, Ignore admits unjudged", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			expect.NoError(t, release.ScaleDeployment(ctx, c.Kube(), it.Namespace, it.Served.Deployment, 0, restartTimeout),
				"stopping the webhooks' pods")
			judged, _ := probedWebhooks(it)
			for _, w := range judged {
				obj, err := it.Target.Object(w.judging())
				expect.NoError(t, err, "reading the probe of webhook %s", w.Name)
				seen, ok := judgeDown(w, dryRun(ctx, c, obj, ns), it.Served.Webhooks)
				suite.Note(ctx, t, w.Name, fmt.Sprintf("failurePolicy %s: %s", w.FailurePolicy, seen))
				t.Logf("webhook %s, failurePolicy %s, %s sent while down: %s", w.Name, w.FailurePolicy, w.judging(), seen)
				if !ok {
					expect.Errorf(t, "webhook %s (%s) while no pod serves it: its chart's failurePolicy is %s, so expected %s; saw %s",
						w.Name, kindOf(w.Mutating), w.FailurePolicy, expectedDown(w), seen)
				}
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			expect.NoError(t, release.ScaleDeployment(ctx, c.Kube(), it.Namespace, it.Served.Deployment, it.Served.Replicas, restartTimeout),
				"restoring the chart's %d replicas", it.Served.Replicas)
			expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
			return ctx
		}).Feature()
}

// failedCalling finds the webhook the API server names when it could not call one.
var failedCalling = regexp.MustCompile(`failed calling webhook "([^"]+)"`)

// expectedDown is what webhook w's failurePolicy promises for its judging probe while no pod
// serves it.
func expectedDown(w probed) string {
	switch {
	case w.FailurePolicy == admissionregistrationv1.Fail:
		return fmt.Sprintf("the API server to refuse %s with: failed calling webhook %q", w.judging(), w.Name)
	case w.Mutating:
		return fmt.Sprintf("%s admitted without its patch %s", w.judging(), w.Probe.Patch)
	default:
		return fmt.Sprintf("%s, which it denies when up, admitted", w.judging())
	}
}

// judgeDown says what s, webhook w's judging probe sent while no pod serves the target's
// webhooks, shows, and whether that is what w's failurePolicy promises. webhooks are the
// target's with the policies its chart documents: a probe refused first by another webhook
// documented Fail (mutating webhooks are called before validating ones) is what that policy
// promises, though w's own policy cannot show with it.
func judgeDown(w probed, s sent, webhooks []target.Webhook) (seen string, ok bool) {
	if s.err != nil {
		m := failedCalling.FindStringSubmatch(s.err.Error())
		switch {
		case m == nil:
			return fmt.Sprintf("refused, but not for a failed webhook call: %v", s.err), false
		case m[1] == w.Name:
			return fmt.Sprintf("refused: %v", s.err), w.FailurePolicy == admissionregistrationv1.Fail
		}
		for _, o := range webhooks {
			if o.Name == m[1] {
				if o.FailurePolicy == admissionregistrationv1.Fail {
					return fmt.Sprintf("refused first by webhook %s (failurePolicy Fail), so %s's own policy does not show with this probe: %v", o.Name, w.Name, s.err), true
				}
				return fmt.Sprintf("refused by webhook %s, whose chart documents failurePolicy %s: %v", o.Name, o.FailurePolicy, s.err), false
			}
		}
		return fmt.Sprintf("refused by webhook %s, not one the target's chart registers: %v", m[1], s.err), false
	}
	if w.FailurePolicy == admissionregistrationv1.Fail {
		return "admitted", false
	}
	return admittedUnjudged(w, s)
}

// admittedUnjudged says what s, webhook w's judging probe admitted, shows, and whether it is
// admitted without w's judgement: a validating webhook's denied probe admitted, a mutating
// one's probe without its patch.
func admittedUnjudged(w probed, s sent) (seen string, ok bool) {
	if w.Mutating {
		ops, err := w.Probe.ExpectedPatch()
		if err != nil {
			return err.Error(), false
		}
		if target.PatchSeen(ops, s.got) == nil {
			return fmt.Sprintf("admitted with its patch %s", w.Probe.Patch), false
		}
		return "admitted without its patch", true
	}
	return "admitted without its judgement", true
}
