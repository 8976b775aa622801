package admission

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/stretchr/testify/assert"
)

// TestRestoreValues: undoing A11's bypass must spell out the failurePolicy and replica count the
// release had (Helm reuses the bypass's values when an upgrade passes none), and values the
// release sets itself must win.
func TestRestoreValues(t *testing.T) {
	r := &chart.Release{Name: "dynamo", Namespace: "dynamo-system"}
	policies := map[string]admissionregistrationv1.FailurePolicyType{
		webhookKey("ValidatingWebhookConfiguration", r.ValidatingName(), graphDeployments.validating): admissionregistrationv1.Fail,
	}

	got := restoreValues(r, policies, 1)
	assert.False(t, got["replicas"] != int64(1) || got["webhook"].(map[string]any)["failurePolicy"] != "Fail", "restoreValues of a release without values: expected replicas 1 and webhook.failurePolicy Fail, saw %v", got)

	r.Values = map[string]any{"replicas": int64(2), "webhook": map[string]any{"timeoutSeconds": int64(5)}}
	got = restoreValues(r, policies, 2)
	webhook := got["webhook"].(map[string]any)
	assert.Equal(t, int64(2), got["replicas"], "restoreValues of a release with its own values: expected replicas 2, webhook.failurePolicy Fail and webhook.timeoutSeconds 5, saw %v", got)
	assert.Equal(t, "Fail", webhook["failurePolicy"], "restoreValues of a release with its own values: expected replicas 2, webhook.failurePolicy Fail and webhook.timeoutSeconds 5, saw %v", got)
	assert.Equal(t, int64(5), webhook["timeoutSeconds"], "restoreValues of a release with its own values: expected replicas 2, webhook.failurePolicy Fail and webhook.timeoutSeconds 5, saw %v", got)
	_, changed := r.Values["webhook"].(map[string]any)["failurePolicy"]
	assert.False(t, changed, "restoreValues changed the release's own values: %v", r.Values)
}
