package release

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func TestDeploymentPodsReplacedWaitsForEveryOldPodOfItsSelectorOnly(t *testing.T) {
	ctx := context.Background()
	selected := map[string]string{"app": "webhook"}
	pod := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: labels}}
	}
	kube := fake.NewClientset(
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "webhook", Namespace: "ns"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: selected}}},
		pod("old", selected), pod("other", map[string]string{"app": "audit"}))
	before, err := DeploymentPodUIDs(ctx, kube, "ns", "webhook")
	require.NoError(t, err)
	assert.Len(t, before, 1, "the pods of the Deployment's selector only")

	require.NoError(t, kube.Tracker().Add(pod("new", selected)))
	done, state, err := DeploymentPodsReplaced(kube, "ns", "webhook", before)(ctx)
	require.NoError(t, err)
	assert.False(t, done)
	assert.Contains(t, state, "old pods left: [old]")

	require.NoError(t, kube.CoreV1().Pods("ns").Delete(ctx, "old", metav1.DeleteOptions{}))
	done, _, err = DeploymentPodsReplaced(kube, "ns", "webhook", before)(ctx)
	require.NoError(t, err)
	assert.True(t, done)
}
