package testbed

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
)

func TestBenchValuesExcludeTheControlNamespaceAndKeepTheCallersValues(t *testing.T) {
	extra, err := ParseValues([]string{"webhook.latencyInjection=5ms", "webhook.timeoutSeconds=5,logLevel=debug"})
	require.NoError(t, err)
	got := benchValues(extra)
	assert.Equal(t, map[string]any{
		"webhook": map[string]any{
			"namespaceSelector": map[string]any{
				"matchExpressions": []any{map[string]any{"key": ControlLabel, "operator": "DoesNotExist"}},
			},
			"latencyInjection": "5ms",
			"timeoutSeconds":   int64(5),
		},
		"logLevel": "debug",
	}, got)

	_, err = ParseValues([]string{"webhook.timeoutSeconds"})
	assert.ErrorContains(t, err, `parsing chart value "webhook.timeoutSeconds"`)
}

func TestWithFlagsReplacesAndAppends(t *testing.T) {
	got := withFlags([]string{"--metrics-bind-address=:8080", "--webhook-port=9443", "--zap-log-level=info"},
		map[string]string{"--webhook-port": "19443", "--kubeconfig": "/tmp/k"})
	assert.Equal(t, []string{"--metrics-bind-address=:8080", "--webhook-port=19443", "--zap-log-level=info", "--kubeconfig=/tmp/k"}, got)
}

func TestPortsOfTheRenderedWebhookObjectsFollowTheOperator(t *testing.T) {
	svc := &unstructured.Unstructured{Object: map[string]any{"kind": "Service", "metadata": map[string]any{"name": "s", "namespace": "n"},
		"spec": map[string]any{"ports": []any{map[string]any{"name": "webhook", "port": int64(443), "targetPort": "webhook-server"}}}}}
	require.NoError(t, setServicePort(svc, 19443))
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	assert.Equal(t, map[string]any{"name": "webhook", "port": int64(19443), "targetPort": int64(19443)}, ports[0])

	vwc := &unstructured.Unstructured{Object: map[string]any{"kind": "ValidatingWebhookConfiguration", "metadata": map[string]any{"name": "v"},
		"webhooks": []any{
			map[string]any{"name": "a", "clientConfig": map[string]any{"service": map[string]any{"name": "s", "namespace": "n", "path": "/a"}}},
			map[string]any{"name": "b", "clientConfig": map[string]any{"service": map[string]any{"name": "s", "namespace": "n", "path": "/b", "port": int64(443)}}},
		}}}
	require.NoError(t, setWebhookPorts(vwc, 19443))
	hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	for _, h := range hooks {
		port, _, _ := unstructured.NestedInt64(h.(map[string]any), "clientConfig", "service", "port")
		assert.Equal(t, int64(19443), port)
	}

	twoPorts := &unstructured.Unstructured{Object: map[string]any{"kind": "Service", "metadata": map[string]any{"name": "s"},
		"spec": map[string]any{"ports": []any{map[string]any{"port": int64(1)}, map[string]any{"port": int64(2)}}}}}
	assert.ErrorContains(t, setServicePort(twoPorts, 1), "want exactly one port in Service s, got 2")
}

func TestEachSideRunsTheImageItsValuesName(t *testing.T) {
	assert.Equal(t, chart.OperatorImageRepository(), localSide{values: benchValues(nil)}.image(), "the chart's default")
	assert.Equal(t, "dynamo-operator-base", localSide{values: map[string]any{"image": map[string]any{"repository": baseOperatorImage()}}}.image())
}
