package procnode

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/klog/v2"
)

// updateStatus writes the pod's status when it changed, as a two-way strategic merge patch
// of the status subresource (what kubelet sends), so fields and conditions others own stay.
func (w *podWorker) updateStatus(ctx context.Context) {
	status := w.buildStatus(w.pod.Status)
	// The informer's copy may lag behind our last patch; either match means nothing to send.
	if apiequality.Semantic.DeepEqual(w.pod.Status, status) ||
		(w.lastStatus != nil && apiequality.Semantic.DeepEqual(*w.lastStatus, status)) {
		return
	}
	patch, err := statusPatch(w.pod, status)
	if err != nil {
		klog.ErrorS(err, "building status patch", "pod", klog.KObj(w.pod))
		return
	}
	updated, err := w.n.client.CoreV1().Pods(w.pod.Namespace).Patch(ctx, w.pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.ErrorS(err, "patching status of pod", "pod", klog.KObj(w.pod))
			w.retryAt = time.Now().Add(retryInterval)
		}
		return
	}
	if updated.UID == w.uid {
		w.pod = updated
	}
	w.lastStatus = &status
}

// statusPatch is the strategic merge patch from pod's status to status, guarded by the
// pod's uid so a recreated pod of the same name is never patched.
func statusPatch(pod *corev1.Pod, status corev1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(corev1.Pod{Status: pod.Status})
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(corev1.Pod{Status: status})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("diffing status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	m["metadata"] = map[string]any{"uid": string(pod.UID)}
	return json.Marshal(m)
}

// buildStatus computes the status kubelet would report from the worker's state, starting
// from the current one so conditions set by others (PodScheduled, DisruptionTarget) stay.
func (w *podWorker) buildStatus(current corev1.PodStatus) corev1.PodStatus {
	s := *current.DeepCopy()
	s.HostIP = w.n.nodeIP
	s.HostIPs = []corev1.HostIP{{IP: w.n.nodeIP}}
	if w.sandbox {
		s.PodIP = w.podIP
		s.PodIPs = []corev1.PodIP{{IP: w.podIP}}
	}
	if s.StartTime == nil {
		st := w.startTime
		s.StartTime = &st
	}
	s.InitContainerStatuses = w.containerStatuses(w.pod.Spec.InitContainers, true)
	s.ContainerStatuses = w.containerStatuses(w.pod.Spec.Containers, false)
	s.Phase = w.phase()

	initialized := w.initialized()
	containersReady := len(s.ContainerStatuses) > 0
	for _, cs := range s.ContainerStatuses {
		containersReady = containersReady && cs.Ready
	}
	notReadyReason := ""
	if !containersReady {
		notReadyReason = "ContainersNotReady"
	}
	if s.Phase == corev1.PodSucceeded || s.Phase == corev1.PodFailed {
		containersReady, notReadyReason = false, "PodCompleted"
	}
	setCondition(&s, corev1.PodReadyToStartContainers, w.sandbox, "")
	initReason := ""
	if !initialized {
		initReason = "ContainersNotInitialized"
	}
	setCondition(&s, corev1.PodInitialized, initialized, initReason)
	setCondition(&s, corev1.ContainersReady, containersReady, notReadyReason)
	setCondition(&s, corev1.PodReady, containersReady, notReadyReason)
	return s
}

// initialized: every regular init container exited 0 and every sidecar has started.
func (w *podWorker) initialized() bool {
	for _, c := range w.pod.Spec.InitContainers {
		r := w.runs[c.Name]
		if r == nil {
			return false
		}
		if r.sidecar {
			if !r.startedOnce {
				return false
			}
			continue
		}
		if !r.completed || r.lastTerm == nil || r.lastTerm.ExitCode != 0 {
			return false
		}
	}
	return true
}

// phase follows kubelet's rules, simplified to what process pods can reach.
func (w *podWorker) phase() corev1.PodPhase {
	for _, c := range w.pod.Spec.InitContainers {
		r := w.runs[c.Name]
		if r != nil && !r.sidecar && r.completed && r.lastTerm != nil && r.lastTerm.ExitCode != 0 {
			return corev1.PodFailed
		}
	}
	if !w.initialized() {
		return corev1.PodPending
	}
	running, succeeded, failed, waiting := 0, 0, 0, 0
	for _, c := range w.pod.Spec.Containers {
		r := w.runs[c.Name]
		switch {
		case r == nil || !r.everStarted:
			waiting++
		case r.proc != nil:
			running++
		case !r.completed:
			// Exited and waiting to restart: still a running pod, as in kubelet.
			running++
		case r.lastTerm != nil && r.lastTerm.ExitCode == 0:
			succeeded++
		default:
			failed++
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case failed > 0:
		return corev1.PodFailed
	case succeeded > 0:
		return corev1.PodSucceeded
	}
	return corev1.PodPending
}

func (w *podWorker) containerStatuses(containers []corev1.Container, init bool) []corev1.ContainerStatus {
	if len(containers) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, 0, len(containers))
	for i := range containers {
		c := &containers[i]
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image}
		r := w.runs[c.Name]
		if r == nil {
			reason := "ContainerCreating"
			if init {
				reason = "PodInitializing"
			} else if len(w.pod.Spec.InitContainers) > 0 && !w.initialized() {
				reason = "PodInitializing"
			}
			if w.volumeErr != nil {
				reason = "ContainerCreating"
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason}
			started := false
			cs.Started = &started
			out = append(out, cs)
			continue
		}
		if r.binary != "" {
			cs.ImageID = "binary://" + r.binary
		}
		cs.RestartCount = r.restartCount
		started := r.proc != nil && r.started
		cs.Started = &started
		cs.Ready = r.proc != nil && r.ready
		switch {
		case r.proc != nil:
			cs.ContainerID = containerID(r.proc)
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(r.proc.started).Rfc3339Copy()}
			cs.LastTerminationState = terminatedState(r.lastTerm)
		case r.completed && r.lastTerm != nil:
			cs.ContainerID = r.lastTerm.ContainerID
			cs.State = terminatedState(r.lastTerm)
			cs.LastTerminationState = terminatedState(r.prevTerm)
		case r.waiting != nil:
			cs.State.Waiting = r.waiting.DeepCopy()
			cs.LastTerminationState = terminatedState(r.lastTerm)
		default:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
			cs.LastTerminationState = terminatedState(r.lastTerm)
		}
		out = append(out, cs)
	}
	return out
}

func terminatedState(t *corev1.ContainerStateTerminated) corev1.ContainerState {
	if t == nil {
		return corev1.ContainerState{}
	}
	return corev1.ContainerState{Terminated: t.DeepCopy()}
}

// setCondition sets a condition, keeping lastTransitionTime while its status is unchanged.
func setCondition(s *corev1.PodStatus, t corev1.PodConditionType, ok bool, reason string) {
	status := corev1.ConditionFalse
	if ok {
		status, reason = corev1.ConditionTrue, ""
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = metav1.Now().Rfc3339Copy()
		}
		c.Status, c.Reason = status, reason
		return
	}
	s.Conditions = append(s.Conditions, corev1.PodCondition{
		Type: t, Status: status, Reason: reason, LastTransitionTime: metav1.Now().Rfc3339Copy(),
	})
}
