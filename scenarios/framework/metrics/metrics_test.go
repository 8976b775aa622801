package metrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSamplesOfAPrometheusExposition(t *testing.T) {
	samples, err := ParseSamples([]byte(`# HELP dynamo_webhook_requests_total Admission requests.
# TYPE dynamo_webhook_requests_total counter
dynamo_webhook_requests_total{webhook="validate",operation="CREATE",result="allowed"} 3
dynamo_webhook_requests_total{webhook="validate",operation="CREATE",result="denied"} 2
dynamo_webhook_requests_total{webhook="mutate",operation="CREATE",result="allowed"} 5
# TYPE dynamo_webhook_certificate_not_after_seconds gauge
dynamo_webhook_certificate_not_after_seconds 1.7e+09
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.001
go_gc_duration_seconds_sum 0.1
go_gc_duration_seconds_count 7
`))
	require.NoError(t, err)
	assert.InDelta(t, 5.0, samples.Sum("dynamo_webhook_requests_total", map[string]string{"webhook": "validate"}), 0)
	assert.InDelta(t, 10.0, samples.Sum("dynamo_webhook_requests_total", nil), 0)
	assert.InDelta(t, 0.0, samples.Sum("dynamo_webhook_requests_total", map[string]string{"webhook": "convert"}), 0)
	v, ok := samples.Value("dynamo_webhook_certificate_not_after_seconds")
	assert.True(t, ok)
	assert.InDelta(t, 1.7e9, v, 0)
	_, ok = samples.Value("go_gc_duration_seconds")
	assert.False(t, ok, "summaries are not read")

	_, err = ParseSamples([]byte("not a metric line {"))
	require.ErrorContains(t, err, "parsing the metrics")
}
