package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// NodeStatsThroughAPIServer reads the kubelet Summary API of node through the API server's
// node proxy (GET /api/v1/nodes/<node>/proxy/stats/summary): how a provider whose nodes the
// API server can proxy to answers Backend.NodeStats. The proxy refuses a node whose address
// is loopback ("address not allowed"), so a provider whose nodes have one reaches them itself.
func NodeStatsThroughAPIServer(ctx context.Context, kube kubernetes.Interface, node string) (*statsv1alpha1.Summary, error) {
	raw, err := kube.CoreV1().RESTClient().Get().
		AbsPath("/api/v1/nodes", node, "proxy", "stats", "summary").
		DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("getting the stats summary of node %s through the API server's node proxy: %w%s", node, err, responseDetail(err))
	}
	var summary statsv1alpha1.Summary
	if err := json.Unmarshal(raw, &summary); err != nil {
		return nil, fmt.Errorf("decoding the stats summary of node %s: %w", node, err)
	}
	return &summary, nil
}

// responseDetail is the HTTP code and, when the answer was no Status client-go could read,
// the body: client-go's message alone may only say "unknown reason".
func responseDetail(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return ""
	}
	s := status.Status()
	detail := fmt.Sprintf(" (HTTP %d", s.Code)
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			if c.Type == metav1.CauseTypeUnexpectedServerResponse {
				detail += ": " + strings.TrimSpace(c.Message)
			}
		}
	}
	return detail + ")"
}
