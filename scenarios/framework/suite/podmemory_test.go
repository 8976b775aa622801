package suite

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

// statsBackend answers NodeStats from summaries by node; the rest of cluster.Backend is unused.
type statsBackend struct {
	cluster.Backend
	summaries map[string]*statsv1alpha1.Summary
}

func (b statsBackend) NodeStats(_ context.Context, node string) (*statsv1alpha1.Summary, error) {
	if s, ok := b.summaries[node]; ok {
		return s, nil
	}
	return nil, errors.New("node " + node + " unreachable")
}

func webPod(node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-1"}, Spec: corev1.PodSpec{NodeName: node}}
}

func TestPodMemoryReadsTheSummaryOfThePodsNode(t *testing.T) {
	summary := func(node string, workingSet uint64) *statsv1alpha1.Summary {
		return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: node}, Pods: []statsv1alpha1.PodStats{{
			PodRef:     statsv1alpha1.PodReference{Namespace: "shop", Name: "web", UID: "uid-1"},
			Containers: []statsv1alpha1.ContainerStats{{Name: "app", Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: ptr.To(workingSet)}}},
		}}}
	}
	c := &Cluster{backend: statsBackend{summaries: map[string]*statsv1alpha1.Summary{"node-a": summary("node-a", 1), "node-b": summary("node-b", 2<<20)}}}
	got, err := c.PodMemory(context.Background(), webPod("node-b"))
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"app": 2 << 20}, got)
}

func TestPodMemorySaysWhosePodsNodeItCouldNotRead(t *testing.T) {
	c := &Cluster{backend: statsBackend{}}
	_, err := c.PodMemory(context.Background(), webPod("node-b"))
	require.EqualError(t, err, "reading the memory of pod shop/web: node node-b unreachable")
}

func TestPodMemoryOfAnUnscheduledPodAsksNoNode(t *testing.T) {
	c := &Cluster{backend: statsBackend{}}
	_, err := c.PodMemory(context.Background(), webPod(""))
	require.EqualError(t, err, "reading the memory of pod shop/web: it is not scheduled to a node, no kubelet to ask")
}
