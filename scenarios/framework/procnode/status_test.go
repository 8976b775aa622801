package procnode

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

func statusWorker(policy corev1.RestartPolicy) *podWorker {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "op-0", Namespace: "ns", UID: "uid-1"},
		Spec:       corev1.PodSpec{RestartPolicy: policy, Containers: []corev1.Container{{Name: "op", Image: "op:1"}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		}},
	}
	return &podWorker{
		n:       &node{nodeIP: "127.0.0.1"},
		pod:     pod,
		uid:     pod.UID,
		sandbox: true,
		podIP:   "10.244.0.2",
		runs:    map[string]*containerRun{},
	}
}

func condition(s corev1.PodStatus, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func TestStatusOfARunningReadyContainer(t *testing.T) {
	w := statusWorker(corev1.RestartPolicyAlways)
	w.runs["op"] = &containerRun{name: "op", everStarted: true, ready: true, started: true,
		proc: &containerProcess{pid: 42, started: time.Now()}}
	s := w.buildStatus(w.pod.Status)
	require.Equal(t, corev1.PodRunning, s.Phase, "phase %s podIP %s hostIP %s", s.Phase, s.PodIP, s.HostIP)
	require.Equal(t, "10.244.0.2", s.PodIP, "phase %s podIP %s hostIP %s", s.Phase, s.PodIP, s.HostIP)
	require.Equal(t, "127.0.0.1", s.HostIP, "phase %s podIP %s hostIP %s", s.Phase, s.PodIP, s.HostIP)
	for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		got := condition(s, ct)
		assert.Equal(t, corev1.ConditionTrue, got, "condition %s = %q, want True", ct, got)
	}
	cs := s.ContainerStatuses[0]
	require.False(t, !cs.Ready || cs.State.Running == nil || cs.ContainerID != "process://42", "container status %+v", cs)
}

func TestStatusOfAContainerInBackOff(t *testing.T) {
	w := statusWorker(corev1.RestartPolicyAlways)
	w.runs["op"] = &containerRun{name: "op", everStarted: true, restartCount: 3,
		waiting:  &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s"},
		lastTerm: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}
	s := w.buildStatus(w.pod.Status)
	require.Equal(t, corev1.PodRunning, s.Phase, "phase of a restarting pod = %s, want Running (as kubelet reports)", s.Phase)
	require.Equal(t, corev1.ConditionFalse, condition(s, corev1.PodReady), "Ready = %s, want False", condition(s, corev1.PodReady))
	cs := s.ContainerStatuses[0]
	require.NotNil(t, cs.State.Waiting, "container status %+v", cs)
	require.Equal(t, "CrashLoopBackOff", cs.State.Waiting.Reason, "container status %+v", cs)
	require.Equal(t, int32(3), cs.RestartCount, "container status %+v", cs)
	require.NotNil(t, cs.LastTerminationState.Terminated, "container status %+v", cs)
	require.Equal(t, int32(2), cs.LastTerminationState.Terminated.ExitCode, "container status %+v", cs)
}

func TestStatusOfCompletedContainers(t *testing.T) {
	for _, tc := range []struct {
		code int32
		want corev1.PodPhase
	}{{0, corev1.PodSucceeded}, {1, corev1.PodFailed}} {
		w := statusWorker(corev1.RestartPolicyNever)
		w.runs["op"] = &containerRun{name: "op", everStarted: true, completed: true,
			lastTerm: &corev1.ContainerStateTerminated{ExitCode: tc.code}}
		s := w.buildStatus(w.pod.Status)
		assert.Equal(t, tc.want, s.Phase, "exit %d: phase %s state %+v, want %s and terminated", tc.code, s.Phase, s.ContainerStatuses[0].State, tc.want)
		assert.NotNil(t, s.ContainerStatuses[0].State.Terminated, "exit %d: phase %s state %+v, want %s and terminated", tc.code, s.Phase, s.ContainerStatuses[0].State, tc.want)
	}
}

func TestStatusPatchIsGuardedByUIDAndKeepsOthersConditions(t *testing.T) {
	w := statusWorker(corev1.RestartPolicyAlways)
	w.runs["op"] = &containerRun{name: "op", everStarted: true, ready: true, started: true,
		proc: &containerProcess{pid: 7, started: time.Now()}}
	patch, err := statusPatch(w.pod, w.buildStatus(w.pod.Status))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(patch, &m))
	require.Equal(t, "uid-1", m["metadata"].(map[string]any)["uid"], "patch %s lacks the uid precondition", patch)
	// Apply it as the apiserver would and check nothing we do not own is lost.
	old, _ := json.Marshal(w.pod)
	merged, err := strategicpatch.StrategicMergePatch(old, patch, corev1.Pod{})
	require.NoError(t, err)
	var got corev1.Pod
	require.NoError(t, json.Unmarshal(merged, &got))
	require.Equal(t, corev1.ConditionTrue, condition(got.Status, corev1.PodScheduled), "patched conditions %+v, want PodScheduled kept and Ready added", got.Status.Conditions)
	require.Equal(t, corev1.ConditionTrue, condition(got.Status, corev1.PodReady), "patched conditions %+v, want PodScheduled kept and Ready added", got.Status.Conditions)
}
