package podstats

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

func pod(name, uid, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + uid)},
		Spec:       corev1.PodSpec{NodeName: node},
	}
}

func container(name string, workingSet uint64) statsv1alpha1.ContainerStats {
	return statsv1alpha1.ContainerStats{Name: name, Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: ptr.To(workingSet)}}
}

func podStats(name, uid string, containers ...statsv1alpha1.ContainerStats) statsv1alpha1.PodStats {
	return statsv1alpha1.PodStats{PodRef: statsv1alpha1.PodReference{Name: name, Namespace: "shop", UID: "uid-" + uid}, Containers: containers}
}

// summary is node-a's summary listing pods.
func summary(pods ...statsv1alpha1.PodStats) *statsv1alpha1.Summary {
	return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: "node-a"}, Pods: pods}
}

func TestContainerMemoryReturnsWorkingSetByContainer(t *testing.T) {
	s := summary(
		podStats("other", "2", container("app", 1)),
		podStats("web", "1", container("app", 64<<20), container("sidecar", 8<<20)),
	)
	got, err := ContainerMemory(s, pod("web", "1", "node-a"))
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"app": 64 << 20, "sidecar": 8 << 20}, got)
}

func TestContainerMemorySaysWhichPodTheSummaryLacks(t *testing.T) {
	s := summary(
		podStats("web", "old", container("app", 1)), // same name, an earlier pod
		podStats("other", "2", container("app", 1)),
	)
	_, err := ContainerMemory(s, pod("web", "1", "node-a"))
	require.ErrorContains(t, err, "pod shop/web not in node node-a's summary (2 pods listed)")
}

func TestContainerMemorySaysWhichContainerHasNoMemoryStats(t *testing.T) {
	s := summary(podStats("web", "1", container("app", 1), statsv1alpha1.ContainerStats{Name: "sidecar"}))
	_, err := ContainerMemory(s, pod("web", "1", "node-a"))
	require.ErrorContains(t, err, "container sidecar of pod shop/web has no memory stats")
}

func TestContainerMemoryRefusesAnotherNodesSummary(t *testing.T) {
	s := summary(podStats("web", "1", container("app", 1)))
	_, err := ContainerMemory(s, pod("web", "1", "node-b"))
	require.ErrorContains(t, err, `the stats summary is node "node-a"'s, pod shop/web runs on node node-b`)
}

func TestContainerMemoryOfAnUnscheduledPodSaysSo(t *testing.T) {
	_, err := ContainerMemory(summary(), pod("web", "1", ""))
	require.ErrorContains(t, err, "pod shop/web is not scheduled to a node")
}
