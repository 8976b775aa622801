// Package podstats reads how much memory a pod's containers use from its node's kubelet
// Summary API (GET /stats/summary, k8s.io/kubelet's stats/v1alpha1). Fetching the summary is
// the provider's job (cluster.Backend.NodeStats, which suite.Cluster.PodMemory composes with
// this package): on kind the real kubelet answers from its cgroups, through the API server's
// node proxy; on the local provider the process node answers from /proc, asked directly since
// the node proxy refuses its loopback address (see procnode's CONTRACT.md for how its numbers
// differ). Scenarios never ask which one it is.
package podstats

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// ContainerMemory returns the working-set bytes of each of pod's containers, by container
// name, from s, the summary of the pod's node. Only running containers are listed by a
// kubelet; a container of the pod missing from the summary is simply absent from the map.
func ContainerMemory(s *statsv1alpha1.Summary, pod *corev1.Pod) (map[string]uint64, error) {
	ps, err := podSummary(s, pod)
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

// podSummary picks pod out of s (by namespace and name; by UID too when pod has one, so a
// re-created pod of the same name is not mistaken for it).
func podSummary(s *statsv1alpha1.Summary, pod *corev1.Pod) (*statsv1alpha1.PodStats, error) {
	node := pod.Spec.NodeName
	if node == "" {
		return nil, fmt.Errorf("pod %s/%s is not scheduled to a node: no kubelet to ask for its stats", pod.Namespace, pod.Name)
	}
	if s.Node.NodeName != node {
		return nil, fmt.Errorf("the stats summary is node %q's, pod %s/%s runs on node %s", s.Node.NodeName, pod.Namespace, pod.Name, node)
	}
	for i := range s.Pods {
		ref := s.Pods[i].PodRef
		if ref.Namespace == pod.Namespace && ref.Name == pod.Name && (pod.UID == "" || ref.UID == string(pod.UID)) {
			return &s.Pods[i], nil
		}
	}
	return nil, fmt.Errorf("pod %s/%s not in node %s's summary (%d pods listed): a kubelet lists pods with running containers only", pod.Namespace, pod.Name, node, len(s.Pods))
}
