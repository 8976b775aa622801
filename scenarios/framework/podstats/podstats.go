// Package podstats reads how much memory a pod's containers use, the same way on every
// provider: the kubelet Summary API (GET /stats/summary, k8s.io/kubelet's stats/v1alpha1),
// fetched through the API server's node proxy. On kind the real kubelet answers from its
// cgroups; on the local provider the process node answers from /proc (see procnode's
// CONTRACT.md for how its numbers differ). Scenarios never ask which one it is.
//
// The API server's node proxy refuses nodes whose address is loopback ("address not
// allowed"): until the process node advertises another address, Memory fails on the local
// provider with that answer in its error.
package podstats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Memory returns the working-set bytes of each of pod's containers, by container name, as
// the kubelet of the pod's node reports them now. Only running containers are listed by a
// kubelet; a container of the pod missing from the summary is simply absent from the map.
func Memory(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod) (map[string]uint64, error) {
	ps, err := podSummary(ctx, kube, pod)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64, len(ps.Containers))
	for _, c := range ps.Containers {
		if c.Memory == nil || c.Memory.WorkingSetBytes == nil {
			return nil, fmt.Errorf("container %s of pod %s/%s has no memory stats (workingSetBytes) in node %s's summary", c.Name, pod.Namespace, pod.Name, pod.Spec.NodeName)
		}
		out[c.Name] = *c.Memory.WorkingSetBytes
	}
	return out, nil
}

// podSummary fetches the summary of pod's node and picks out pod (by namespace and name; by
// UID too when pod has one, so a re-created pod of the same name is not mistaken for it).
func podSummary(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod) (*statsv1alpha1.PodStats, error) {
	node := pod.Spec.NodeName
	if node == "" {
		return nil, fmt.Errorf("pod %s/%s is not scheduled to a node: no kubelet to ask for its stats", pod.Namespace, pod.Name)
	}
	raw, err := kube.CoreV1().RESTClient().Get().
		AbsPath("/api/v1/nodes", node, "proxy", "stats", "summary").
		DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("getting the stats summary of node %s (for pod %s/%s) through the API server's node proxy: %w%s", node, pod.Namespace, pod.Name, err, responseDetail(err))
	}
	var summary statsv1alpha1.Summary
	if err := json.Unmarshal(raw, &summary); err != nil {
		return nil, fmt.Errorf("decoding the stats summary of node %s (for pod %s/%s): %w", node, pod.Namespace, pod.Name, err)
	}
	for i := range summary.Pods {
		ref := summary.Pods[i].PodRef
		if ref.Namespace == pod.Namespace && ref.Name == pod.Name && (pod.UID == "" || ref.UID == string(pod.UID)) {
			return &summary.Pods[i], nil
		}
	}
	return nil, fmt.Errorf("pod %s/%s not in node %s's summary (%d pods listed): a kubelet lists pods with running containers only", pod.Namespace, pod.Name, node, len(summary.Pods))
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
