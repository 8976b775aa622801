package podstats

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// fakeAPIServer answers the node proxy's summary path of node-a with summary, 404 elsewhere.
func fakeAPIServer(t *testing.T, summary statsv1alpha1.Summary) kubernetes.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/nodes/node-a/proxy/stats/summary" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(summary)
	}))
	t.Cleanup(srv.Close)
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	return kube
}

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

func TestMemoryReturnsWorkingSetByContainer(t *testing.T) {
	kube := fakeAPIServer(t, statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{NodeName: "node-a"},
		Pods: []statsv1alpha1.PodStats{
			podStats("other", "2", container("app", 1)),
			podStats("web", "1", container("app", 64<<20), container("sidecar", 8<<20)),
		},
	})
	got, err := Memory(context.Background(), kube, pod("web", "1", "node-a"))
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"app": 64 << 20, "sidecar": 8 << 20}, got)
}

func TestMemorySaysWhichPodTheSummaryLacks(t *testing.T) {
	kube := fakeAPIServer(t, statsv1alpha1.Summary{Pods: []statsv1alpha1.PodStats{
		podStats("web", "old", container("app", 1)), // same name, an earlier pod
		podStats("other", "2", container("app", 1)),
	}})
	_, err := Memory(context.Background(), kube, pod("web", "1", "node-a"))
	require.ErrorContains(t, err, "pod shop/web not in node node-a's summary (2 pods listed)")
}

func TestMemorySaysWhichContainerHasNoMemoryStats(t *testing.T) {
	kube := fakeAPIServer(t, statsv1alpha1.Summary{Pods: []statsv1alpha1.PodStats{
		podStats("web", "1", container("app", 1), statsv1alpha1.ContainerStats{Name: "sidecar"}),
	}})
	_, err := Memory(context.Background(), kube, pod("web", "1", "node-a"))
	require.ErrorContains(t, err, "container sidecar of pod shop/web has no memory stats")
}

func TestMemoryNamesTheNodeWhoseSummaryFailed(t *testing.T) {
	kube := fakeAPIServer(t, statsv1alpha1.Summary{})
	_, err := Memory(context.Background(), kube, pod("web", "1", "node-b"))
	require.ErrorContains(t, err, "getting the stats summary of node node-b (for pod shop/web)")
	require.ErrorContains(t, err, "HTTP 404: unexpected GET /api/v1/nodes/node-b/proxy/stats/summary", "the error should carry what the server answered")
}

func TestMemoryOfAnUnscheduledPodSaysSo(t *testing.T) {
	_, err := Memory(context.Background(), fakeAPIServer(t, statsv1alpha1.Summary{}), pod("web", "1", ""))
	require.ErrorContains(t, err, "pod shop/web is not scheduled to a node")
}
