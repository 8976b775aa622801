package testbed

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestSkippingControlKeepsTheTargetsOwnSelectorAndSkipsTheControlNamespaces(t *testing.T) {
	// Gatekeeper's validation webhook's selector, as its chart renders it.
	own := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "admission.gatekeeper.sh/ignore", Operator: metav1.LabelSelectorOpDoesNotExist},
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"gatekeeper-system"}},
	}}
	got := skippingControl(own)
	assert.Equal(t, append(own.DeepCopy().MatchExpressions, metav1.LabelSelectorRequirement{Key: ControlLabel, Operator: metav1.LabelSelectorOpDoesNotExist}),
		got.MatchExpressions)
	assert.Len(t, own.MatchExpressions, 2, "the webhook's selector is not changed in place")
	assert.Equal(t, got, skippingControl(got), "applied twice, the expression is there once")
	assert.Equal(t, []metav1.LabelSelectorRequirement{{Key: ControlLabel, Operator: metav1.LabelSelectorOpDoesNotExist}},
		skippingControl(nil).MatchExpressions, "a webhook without a selector (every namespace) gets one")
}

func TestTheFloorOfATargetMatchesItsProbesResource(t *testing.T) {
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	validating, mutating := floorWebhooks([]byte("ca"), configMaps, plainFloor, "")
	for _, rules := range [][]string{
		validating.Webhooks[0].Rules[0].APIGroups, validating.Webhooks[0].Rules[0].APIVersions, validating.Webhooks[0].Rules[0].Resources,
	} {
		assert.Len(t, rules, 1)
	}
	assert.Equal(t, []string{""}, validating.Webhooks[0].Rules[0].APIGroups)
	assert.Equal(t, []string{"configmaps"}, mutating.Webhooks[0].Rules[0].Resources)
	assert.Equal(t, map[string]string{FloorLabel: "true"}, mutating.Webhooks[0].NamespaceSelector.MatchLabels)
}
