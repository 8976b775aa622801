package cluster_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
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

func TestNodeStatsThroughAPIServerReadsTheNodesSummary(t *testing.T) {
	want := statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{NodeName: "node-a"},
		Pods: []statsv1alpha1.PodStats{{PodRef: statsv1alpha1.PodReference{Name: "web", Namespace: "shop", UID: "uid-1"}}},
	}
	got, err := cluster.NodeStatsThroughAPIServer(context.Background(), fakeAPIServer(t, want), "node-a")
	require.NoError(t, err)
	require.Equal(t, want, *got)
}

func TestNodeStatsThroughAPIServerNamesTheNodeAndTheServersAnswer(t *testing.T) {
	_, err := cluster.NodeStatsThroughAPIServer(context.Background(), fakeAPIServer(t, statsv1alpha1.Summary{}), "node-b")
	require.ErrorContains(t, err, "getting the stats summary of node node-b through the API server's node proxy")
	require.ErrorContains(t, err, "HTTP 404: unexpected GET /api/v1/nodes/node-b/proxy/stats/summary", "the error should carry what the server answered")
}
