package chart_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
)

func TestWebhookConfigurationsPerTopology(t *testing.T) {
	fail, ignore := admissionregistrationv1.Fail, admissionregistrationv1.Ignore
	teamSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"dynamo.nvidia.com/managed": "true"}}
	teamA := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "team-a"}}

	cases := []struct {
		name           string
		namespace      string
		values         string
		validatingName string
		mutatingName   string
		failurePolicy  admissionregistrationv1.FailurePolicyType
		timeoutSeconds int32
		selector       *metav1.LabelSelector
	}{
		{
			name:           "cluster-wide defaults",
			namespace:      "platform-system",
			validatingName: "dynamo-validating",
			mutatingName:   "dynamo-mutating",
			failurePolicy:  fail,
			timeoutSeconds: 10,
			selector:       &metav1.LabelSelector{},
		},
		{
			name:      "cluster-wide with failurePolicy, timeout and namespaceSelector values",
			namespace: "platform-system",
			values: `
webhook:
  failurePolicy: Ignore
  timeoutSeconds: 3
  namespaceSelector: {matchLabels: {dynamo.nvidia.com/managed: "true"}}`,
			validatingName: "dynamo-validating",
			mutatingName:   "dynamo-mutating",
			failurePolicy:  ignore,
			timeoutSeconds: 3,
			selector:       teamSelector,
		},
		{
			// Ignore by default: when the restricted operator stops, the cluster-wide one takes
			// the namespace back, which Fail would defeat.
			name:           "restricted to the release namespace",
			namespace:      "team-a",
			values:         `{namespaceRestriction: {enabled: true}, crds: {install: false}}`,
			validatingName: "dynamo-validating-team-a",
			mutatingName:   "dynamo-mutating-team-a",
			failurePolicy:  ignore,
			timeoutSeconds: 10,
			selector:       teamA,
		},
		{
			name:           "restricted with an explicit failurePolicy Fail keeps it",
			namespace:      "team-a",
			values:         `{namespaceRestriction: {enabled: true}, crds: {install: false}, webhook: {failurePolicy: Fail}}`,
			validatingName: "dynamo-validating-team-a",
			mutatingName:   "dynamo-mutating-team-a",
			failurePolicy:  fail,
			timeoutSeconds: 10,
			selector:       teamA,
		},
		{
			name:      "restricted forces its namespaceSelector over the value",
			namespace: "dynamo-team-a",
			values: `
crds: {install: false}
namespaceRestriction: {enabled: true, namespace: team-a}
webhook:
  failurePolicy: Ignore
  timeoutSeconds: 30
  namespaceSelector: {matchLabels: {dynamo.nvidia.com/managed: "true"}}`,
			validatingName: "dynamo-validating-team-a",
			mutatingName:   "dynamo-mutating-team-a",
			failurePolicy:  ignore,
			timeoutSeconds: 30,
			selector:       teamA,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := render(t, tc.namespace, tc.values)
			assert.Equal(t, []string{tc.validatingName}, o.names("ValidatingWebhookConfiguration"))
			assert.Equal(t, []string{tc.mutatingName}, o.names("MutatingWebhookConfiguration"))

			vwc, mwc := webhookConfigs(t, o, tc.validatingName, tc.mutatingName)
			gotValidating := map[string]string{}
			for _, w := range validatingViews(vwc) {
				gotValidating[w.name] = ptrValue(ptrValue(w.clientConfig.Service).Path)
			}
			gotMutating := map[string]string{}
			for _, w := range mutatingViews(mwc) {
				gotMutating[w.name] = ptrValue(ptrValue(w.clientConfig.Service).Path)
			}
			assert.Equal(t, wantValidatingPaths, gotValidating, "validating webhooks and their paths")
			assert.Equal(t, wantMutatingPaths, gotMutating, "mutating webhooks and their paths")

			for _, w := range append(validatingViews(vwc), mutatingViews(mwc)...) {
				require.NotNil(t, w.clientConfig.Service, "webhook %s has a service reference", w.name)
				assert.Nil(t, w.clientConfig.URL, "webhook %s must not use a URL", w.name)
				assert.Equal(t, "dynamo-webhook-service", w.clientConfig.Service.Name, "webhook %s service", w.name)
				assert.Equal(t, tc.namespace, w.clientConfig.Service.Namespace, "webhook %s service namespace", w.name)
				assert.Equal(t, int32(443), ptrValue(w.clientConfig.Service.Port), "webhook %s service port", w.name)
				assert.Equal(t, tc.failurePolicy, ptrValue(w.failurePolicy), "webhook %s failurePolicy", w.name)
				assert.Equal(t, tc.timeoutSeconds, ptrValue(w.timeoutSeconds), "webhook %s timeoutSeconds", w.name)
				assert.Equal(t, tc.selector, w.namespaceSelector, "webhook %s namespaceSelector", w.name)
			}
		})
	}
}

// The chart owns where webhooks point and how they fail; everything else (rules, side effects,
// review versions, match and reinvocation policy) must come unchanged from the generated manifest.
func TestWebhooksKeepGeneratedFields(t *testing.T) {
	dir, err := chart.Dir()
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(dir, "files", "webhook", "manifests.yaml")) //nolint:gosec // G304: a file of this repository
	require.NoError(t, err)
	generated, err := chart.DecodeManifest(string(raw))
	require.NoError(t, err)
	genObjects := objects(generated)
	require.Len(t, genObjects.ofKind("ValidatingWebhookConfiguration"), 1)
	require.Len(t, genObjects.ofKind("MutatingWebhookConfiguration"), 1)
	genVWC := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, genObjects, "ValidatingWebhookConfiguration", genObjects.ofKind("ValidatingWebhookConfiguration")[0].GetName())
	genMWC := get[admissionregistrationv1.MutatingWebhookConfiguration](t, genObjects, "MutatingWebhookConfiguration", genObjects.ofKind("MutatingWebhookConfiguration")[0].GetName())

	vwc, mwc := webhookConfigs(t, render(t, testNamespace, ""), "dynamo-validating", "dynamo-mutating")
	require.Len(t, vwc.Webhooks, len(genVWC.Webhooks))
	require.Len(t, mwc.Webhooks, len(genMWC.Webhooks))
	for i, want := range genVWC.Webhooks {
		got := vwc.Webhooks[i]
		assert.Equal(t, want.Name, got.Name)
		assert.Equal(t, want.Rules, got.Rules, "webhook %s rules", want.Name)
		assert.Equal(t, want.SideEffects, got.SideEffects, "webhook %s sideEffects", want.Name)
		assert.Equal(t, want.AdmissionReviewVersions, got.AdmissionReviewVersions, "webhook %s admissionReviewVersions", want.Name)
		assert.Equal(t, want.MatchPolicy, got.MatchPolicy, "webhook %s matchPolicy", want.Name)
		assert.Equal(t, want.ObjectSelector, got.ObjectSelector, "webhook %s objectSelector", want.Name)
	}
	for i, want := range genMWC.Webhooks {
		got := mwc.Webhooks[i]
		assert.Equal(t, want.Name, got.Name)
		assert.Equal(t, want.Rules, got.Rules, "webhook %s rules", want.Name)
		assert.Equal(t, want.SideEffects, got.SideEffects, "webhook %s sideEffects", want.Name)
		assert.Equal(t, want.AdmissionReviewVersions, got.AdmissionReviewVersions, "webhook %s admissionReviewVersions", want.Name)
		assert.Equal(t, want.MatchPolicy, got.MatchPolicy, "webhook %s matchPolicy", want.Name)
		assert.Equal(t, want.ReinvocationPolicy, got.ReinvocationPolicy, "webhook %s reinvocationPolicy", want.Name)
		assert.Equal(t, want.ObjectSelector, got.ObjectSelector, "webhook %s objectSelector", want.Name)
	}
}
