package target

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
)

// otherWebhook is a configuration whose one webhook calls Service svc of namespace ns.
func otherWebhook(name, ns, svc string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": map[string]any{"name": name},
		"webhooks": []any{map[string]any{"name": name + ".example", "clientConfig": map[string]any{"service": map[string]any{"name": svc, "namespace": ns}}}},
	}}
}

// An operator that registers its webhooks at runtime: the chart renders none, the cluster holds
// them. gauntlet's chart stands in for one, its configurations moved from the render to the
// cluster, beside one of another Service of the namespace and one of another namespace.
func TestServedAtRuntimeReadsTheClustersConfigurationsOfTheNamedDeployment(t *testing.T) {
	objs, err := chart.Render("dynamo", "dynamo-system", nil)
	require.NoError(t, err)
	want, err := ServedBy(objs, "dynamo-system", Names{Secret: servingSecret})
	require.NoError(t, err)

	var rendered, live []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ValidatingWebhookConfiguration" || o.GetKind() == "MutatingWebhookConfiguration" {
			live = append(live, o)
		} else {
			rendered = append(rendered, o)
		}
	}
	require.NotEmpty(t, live)
	assert.True(t, RegistersWebhooks(objs))
	assert.False(t, RegistersWebhooks(rendered))
	live = append(live, otherWebhook("cleanup", "dynamo-system", "dynamo-operator-metrics-service"), otherWebhook("elsewhere", "kube-system", "dynamo-webhook-service"))

	got, skipped, err := ServedAtRuntime(rendered, live, "dynamo-system", Names{Deployment: "dynamo-operator", Secret: servingSecret})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, []string{"cleanup/cleanup.example (Service dynamo-operator-metrics-service)"}, skipped)

	_, _, err = ServedAtRuntime(rendered, live, "dynamo-system", Names{Secret: servingSecret})
	require.EqualError(t, err, "the rendered chart registers no webhook (the operator registers its own at runtime): set names.deployment to the Deployment whose pods serve them")
	_, _, err = ServedAtRuntime(rendered, live, "dynamo-system", Names{Deployment: "nope", Secret: servingSecret})
	require.EqualError(t, err, "names.deployment nope is not a Deployment the chart renders")
	_, _, err = ServedAtRuntime(rendered, live[len(live)-2:], "dynamo-system", Names{Deployment: "dynamo-operator", Secret: servingSecret})
	require.EqualError(t, err, "no webhook configuration in the cluster calls a Service in front of Deployment dynamo-operator yet (the namespace's other webhooks: cleanup/cleanup.example (Service dynamo-operator-metrics-service))")
}
