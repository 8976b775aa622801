package chart_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// More than one replica gets a PodDisruptionBudget over exactly the operator pods, allowing one
// eviction at a time; one replica (or enabled: false) gets none, since a budget could then only
// block drains.
func TestPodDisruptionBudget(t *testing.T) {
	o := render(t, testNamespace, `replicas: 2`)
	pdb := get[policyv1.PodDisruptionBudget](t, o, "PodDisruptionBudget", "dynamo-operator")
	deploy := get[appsv1.Deployment](t, o, "Deployment", "dynamo-operator")
	assert.Equal(t, testNamespace, pdb.Namespace)
	if assert.NotNil(t, pdb.Spec.MaxUnavailable) {
		assert.Equal(t, "1", pdb.Spec.MaxUnavailable.String(), "one operator pod may be evicted at a time")
	}
	assert.Nil(t, pdb.Spec.MinAvailable)
	assert.Equal(t, deploy.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels, "the budget covers the operator pods")

	for _, values := range []string{``, `replicas: 1`, `{replicas: 3, podDisruptionBudget: {enabled: false}}`} {
		assert.Nil(t, render(t, testNamespace, values).find("PodDisruptionBudget", "dynamo-operator"), "values %q: expected no PodDisruptionBudget", values)
	}
}
