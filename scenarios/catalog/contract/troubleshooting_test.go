package contract

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/doctor"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

func TestJudgeFailedCallRequiresTheSymptomInARefusal(t *testing.T) {
	_, ok := judgeFailedCall(webhook("v.example.com"), failedCall("v.example.com"), documented, operatorDown)
	assert.True(t, ok, "no endpoints is what a resolver that picks endpoints says of a Deployment scaled to 0")
	seen, ok := judgeFailedCall(webhook("v.example.com"), failedCall("v.example.com"), documented, unknownAuthority)
	assert.False(t, ok)
	assert.Contains(t, seen, "refused, but without `x509: certificate signed by unknown authority`")
}

func TestJudgeFailedCallIgnoreAdmittedUnjudgedHolds(t *testing.T) {
	_, ok := judgeFailedCall(webhook("vi.example.com"), admitted(nil), documented, serviceNotFound("svc"))
	assert.True(t, ok)
}

func TestJudgeUnjudgedRefusalOrJudgementFails(t *testing.T) {
	_, ok := judgeUnjudged(webhook("v.example.com"), sent{err: errors.New(`admission webhook "v.example.com" denied the request: no`)})
	assert.False(t, ok)
	_, ok = judgeUnjudged(webhook("mi.example.com"), admitted(map[string]any{"owner": "x"}))
	assert.False(t, ok, "the patch shows: the webhook was called")
	_, ok = judgeUnjudged(webhook("mi.example.com"), admitted(nil))
	assert.True(t, ok)
}

func TestJudgeDiagnosisWantsTheOneRootCause(t *testing.T) {
	one := doctor.Report{ExitCode: doctor.ExitUnhealthy, Results: []doctor.Result{
		{ID: "webhook-service", Status: doctor.StatusFail, Scenario: "T8"},
		{ID: "admission-dry-run", Status: "consequence"},
	}}
	assert.Empty(t, judgeDiagnosis(one, "webhook-service", ""))
	assert.Contains(t, judgeDiagnosis(one, "service-endpoints", ""), "root causes [webhook-service (T8)]")
	two := doctor.Report{ExitCode: doctor.ExitUnhealthy, Results: append(one.Results, doctor.Result{ID: "ca-bundle", Status: doctor.StatusFail, Scenario: "T3"})}
	assert.Contains(t, judgeDiagnosis(two, "webhook-service", ""), "root causes [webhook-service (T8), ca-bundle (T3)]")
	assert.Contains(t, judgeDiagnosis(doctor.Report{ExitCode: doctor.ExitHealthy}, "webhook-service", ""), "exit 0")
}

// With no pod serving, a user meets T6 (calls refused) as soon as one validating webhook fails
// closed; T7 (objects pass unjudged) only when every one is Ignore. Gatekeeper's chart mixes them.
func TestOperatorDownIsT6WhenAnyValidatingWebhookFailsClosed(t *testing.T) {
	w := func(mutating bool, policy admissionregistrationv1.FailurePolicyType) target.Webhook {
		return target.Webhook{Mutating: mutating, FailurePolicy: policy}
	}
	fail, ignore := admissionregistrationv1.Fail, admissionregistrationv1.Ignore
	for _, c := range []struct {
		name     string
		webhooks []target.Webhook
		want     string
	}{
		{"gatekeeper: validation Ignore, check-ignore-label Fail, mutation Ignore", []target.Webhook{w(false, ignore), w(false, fail), w(true, ignore)}, "T6"},
		{"every validating webhook Ignore", []target.Webhook{w(false, ignore), w(true, fail)}, "T7"},
		{"gauntlet: every webhook Fail", []target.Webhook{w(false, fail), w(true, fail)}, "T6"},
	} {
		assert.Equal(t, c.want, operatorDownScenario(c.webhooks), c.name)
	}
}

func TestT1DeletesAConfigurationWhoseProbesShowTheSymptom(t *testing.T) {
	judged := []probed{
		{Webhook: target.Webhook{Name: "mutate.kyverno.svc-fail", Configuration: "kyverno-resource-mutating-webhook-cfg", Mutating: true}},
		{Webhook: target.Webhook{Name: "validate.kyverno.svc-fail", Configuration: "kyverno-resource-validating-webhook-cfg"}},
		{Webhook: target.Webhook{Name: "validate-policy.kyverno.svc", Configuration: "kyverno-policy-validating-webhook-cfg"}},
	}
	// kyverno-cel-exception-validating-webhook-cfg comes first by name, but holds no probed
	// webhook: deleting it would show no symptom.
	assert.Equal(t, "kyverno-policy-validating-webhook-cfg", probedValidatingConfiguration(judged))
	assert.Empty(t, probedValidatingConfiguration(judged[:1]), "only a mutating webhook is probed: no validating configuration to delete")
}
