// Package contract holds the W catalog (CATALOG.md §W): the webhook contract every operator that
// serves admission webhooks makes with the API server, checked against any target from its
// description alone (scenarios/framework/target). No check knows Dynamo, or how a provider runs
// pods: names come from the rendered chart, objects from the description's probes.
package contract

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// Features are the W checks, in catalog order but for W15, which runs before W4's restarts
// replace the pods that made or loaded the first serving certificate.
func Features() []e2etypes.Feature {
	return []e2etypes.Feature{install(), servingCertificate(), probes(), noPrivateKeyInLogs(), firstAdmission(), restartKeepsCertificate(), secretDeleted(), caBundleEmptied(), rotationUnderLoad(), restartsUnderLoad(), hostileInput(), tlsPolicy(), failurePolicyWhileDown(), gracefulStop(), everyReplicaServes(), troubleshootingSymptoms()}
}

// answerTimeout bounds the wait for a webhook to judge its probes after the install: a policy
// engine compiles what the setup applied (Gatekeeper: a ConstraintTemplate) before it denies.
const answerTimeout = 2 * time.Minute

// sent is one probe object sent to the API server as a server-side dry-run create, and the answer.
type sent struct {
	obj *unstructured.Unstructured
	got *unstructured.Unstructured
	err error
}

// dryRun creates obj (a copy, in namespace ns when its kind is namespaced) as a server-side dry
// run: every admission webhook judges it, nothing is stored.
func dryRun(ctx context.Context, c *suite.Cluster, obj *unstructured.Unstructured, ns string) sent {
	obj = obj.DeepCopy()
	res, err := c.ResourceOf(obj, ns)
	if err != nil {
		return sent{obj: obj, err: err}
	}
	got, err := res.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return sent{obj: obj, got: got, err: err}
}

// describe names obj as users know it: Kind namespace/name, or Kind name.
func describe(obj *unstructured.Unstructured, ns string) string {
	if obj.GetNamespace() == "" && ns != "" {
		return fmt.Sprintf("%s %s/%s", obj.GetKind(), ns, obj.GetName())
	}
	return fmt.Sprintf("%s %s", obj.GetKind(), obj.GetName())
}

// deniedBy is the start of the API server's message when webhook denies a request.
func deniedBy(webhook string) string {
	return fmt.Sprintf("admission webhook %q denied the request", webhook)
}

// judgeDenial says how s fails to be a denial of probe p, or "" when it is one: the API server
// answered with the webhook's denial and the message the description declares. A refusal by the
// API server itself (the CRD's schema) means the description's object is broken, and says so.
func judgeDenial(p target.Probe, s sent) string {
	switch {
	case s.err == nil:
		return fmt.Sprintf("expected webhook %s to deny %s with %q, saw it admitted", p.Webhook, p.Denied.Object, p.Denied.Message)
	case !strings.Contains(s.err.Error(), "admission webhook"):
		if apierrors.IsInvalid(s.err) || apierrors.IsBadRequest(s.err) {
			return fmt.Sprintf("the API server refused %s before any webhook judged it (a broken probe in the description, not a denial): %v", p.Denied.Object, s.err)
		}
		return fmt.Sprintf("expected webhook %s to deny %s with %q, saw: %v", p.Webhook, p.Denied.Object, p.Denied.Message, s.err)
	case !strings.Contains(s.err.Error(), deniedBy(p.Webhook)) || !strings.Contains(s.err.Error(), p.Denied.Message):
		return fmt.Sprintf("expected %s: … %s, saw: %v", deniedBy(p.Webhook), p.Denied.Message, s.err)
	}
	return ""
}

// judgePatch says how s fails to show mutating probe p's patch, or "" when it shows it.
func judgePatch(p target.Probe, s sent) string {
	if s.err != nil {
		return fmt.Sprintf("expected %s admitted with webhook %s's patch, saw: %v", p.Admitted, p.Webhook, s.err)
	}
	ops, err := p.ExpectedPatch()
	if err != nil {
		return err.Error()
	}
	if err := target.PatchSeen(ops, s.got); err != nil {
		return fmt.Sprintf("webhook %s's patch %s is not in the admitted %s: %v", p.Webhook, p.Patch, p.Admitted, err)
	}
	return ""
}

// probed is a webhook the chart registers and the description's probe of it.
type probed struct {
	target.Webhook
	Probe target.Probe
}

// judging is the manifest that shows the webhook judges: a validating one's denied probe (its
// denial shows), a mutating one's admitted probe (its patch shows).
func (w probed) judging() string {
	if w.Mutating {
		return w.Probe.Admitted
	}
	return w.Probe.Denied.Object
}

// probedWebhooks pairs each webhook the chart registers with the description's probe that can
// show it judges; problems says, for the others, why nothing can (W1 fails on them, the other
// checks leave them out).
func probedWebhooks(it *target.Installed) (judged []probed, problems []string) {
	var unprobed []string
	for _, w := range it.Served.Webhooks {
		p := probeOf(it, w.Name)
		switch {
		case p == nil:
			unprobed = append(unprobed, w.Name)
		case !w.Mutating && p.Denied == nil:
			problems = append(problems, fmt.Sprintf("the probe of validating webhook %s has no denied object: nothing proves it answers", w.Name))
		case w.Mutating && p.Patch == "":
			problems = append(problems, fmt.Sprintf("the probe of mutating webhook %s has no patch: nothing proves it answers", w.Name))
		default:
			judged = append(judged, probed{Webhook: w, Probe: *p})
		}
	}
	if len(unprobed) > 0 {
		problems = append(problems, fmt.Sprintf("the chart registers webhooks the description has no probe for: %s (add them under probes)", strings.Join(unprobed, ", ")))
	}
	return judged, problems
}

// answer sends webhook w its judging probe once, and says how the answer falls short of w's
// judgement ("" when it shows it): a validating webhook's denial with the declared message, a
// mutating one's declared patch.
func answer(ctx context.Context, c *suite.Cluster, it *target.Installed, w probed, ns string) (string, error) {
	obj, err := it.Target.Object(w.judging())
	if err != nil {
		return "", err
	}
	s := dryRun(ctx, c, obj, ns)
	if w.Mutating {
		return judgePatch(w.Probe, s), nil
	}
	return judgeDenial(w.Probe, s), nil
}

// expectAnswers waits until every webhook with a probe that can show it judges (probedWebhooks)
// answers it through the API server, in namespace ns, all before deadline; or stops the test
// quoting the last answer.
func expectAnswers(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed, ns string, deadline time.Time) {
	t.Helper()
	judged, _ := probedWebhooks(it)
	for _, w := range judged {
		expect.Eventually(ctx, t, fmt.Sprintf("webhook %s (%s, failurePolicy %s) to answer its probe", w.Name, kindOf(w.Mutating), w.FailurePolicy), until(deadline),
			func(ctx context.Context) (bool, string, error) {
				seen, err := answer(ctx, c, it, w, ns)
				return seen == "", seen, err
			})
	}
}

// until is the time left before deadline, and never less than one check: a wait whose
// deadline an earlier wait used up still looks once.
func until(deadline time.Time) time.Duration {
	return max(time.Until(deadline), poll.Interval)
}

func kindOf(mutating bool) string {
	if mutating {
		return "mutating"
	}
	return "validating"
}

// probeOf is the description's probe of webhook, or nil.
func probeOf(it *target.Installed, webhook string) *target.Probe {
	for i := range it.Target.Probes {
		if it.Target.Probes[i].Webhook == webhook {
			return &it.Target.Probes[i]
		}
	}
	return nil
}
