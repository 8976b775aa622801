package chart_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
)

func TestSchemaRejectsInvalidValues(t *testing.T) {
	cases := []struct {
		name   string
		values string
		// want are substrings of Helm's schema error: the offending key or value.
		want []string
	}{
		{name: "typo in a webhook key", values: `{webhook: {failurPolicy: Ignore}}`, want: []string{"failurPolicy", "/webhook"}},
		{name: "typo at the top level", values: `{replica: 2}`, want: []string{"replica"}},
		{name: "typo in a nested object", values: `{namespaceRestriction: {lease: {duraton: 10s}}}`, want: []string{"duraton", "/namespaceRestriction/lease"}},
		{name: "failurePolicy outside the enum", values: `{webhook: {failurePolicy: Sometimes}}`, want: []string{"/webhook/failurePolicy", "Fail", "Ignore"}},
		{name: "issuerRef kind outside the enum", values: `{webhook: {certManager: {enabled: true, issuerRef: {kind: Vault, name: x}}}}`, want: []string{"/webhook/certManager/issuerRef/kind", "ClusterIssuer"}},
		{name: "latencyInjection not a duration", values: `{webhook: {latencyInjection: soon}}`, want: []string{"/webhook/latencyInjection"}},
		{name: "timeoutSeconds above the API limit", values: `{webhook: {timeoutSeconds: 31}}`, want: []string{"/webhook/timeoutSeconds"}},
		{name: "duration that is not a Go duration", values: `{webhook: {certificateValidity: {ca: 10y}}}`, want: []string{"/webhook/certificateValidity/ca"}},
		{name: "logLevel past the most verbose", values: `{logLevel: 129}`, want: []string{"/logLevel"}},
		{name: "image tag given as a number", values: `{image: {tag: 1.5}}`, want: []string{"/image/tag", "string"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := renderError(t, tc.values)
			for _, want := range tc.want {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}

func TestReleaseNameTooLongFails(t *testing.T) {
	name := strings.Repeat("r", 48)
	_, err := chart.RenderChart(testChart(t), name, testNamespace, nil)
	assert.ErrorContains(t, err, "must be at most 63 characters")
}

// helm lint --strict, in every certificate mode and topology.
func TestHelmLintStrict(t *testing.T) {
	dir, err := chart.Dir()
	require.NoError(t, err)
	for name, valuesYAML := range map[string]string{
		"automatic":    "",
		"cert-manager": `{webhook: {certManager: {enabled: true}}}`,
		"external":     `{webhook: {certificateSecret: {external: true}, caBundle: ` + testCABundle(t) + `}}`,
		"restricted":   `{namespaceRestriction: {enabled: true}, crds: {install: false}}`,
	} {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = testNamespace
			result := lint.Run([]string{dir}, values(t, valuesYAML))
			for _, msg := range result.Messages {
				t.Log(msg)
			}
			assert.Empty(t, result.Errors)
			assert.Equal(t, 1, result.TotalChartsLinted)
		})
	}
}
