package procnode

import (
	"encoding/json"
	"testing"
	"time"

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
	if s.Phase != corev1.PodRunning || s.PodIP != "10.244.0.2" || s.HostIP != "127.0.0.1" {
		t.Fatalf("phase %s podIP %s hostIP %s", s.Phase, s.PodIP, s.HostIP)
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if got := condition(s, ct); got != corev1.ConditionTrue {
			t.Errorf("condition %s = %q, want True", ct, got)
		}
	}
	cs := s.ContainerStatuses[0]
	if !cs.Ready || cs.State.Running == nil || cs.ContainerID != "process://42" {
		t.Fatalf("container status %+v", cs)
	}
}

func TestStatusOfAContainerInBackOff(t *testing.T) {
	w := statusWorker(corev1.RestartPolicyAlways)
	w.runs["op"] = &containerRun{name: "op", everStarted: true, restartCount: 3,
		waiting:  &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s"},
		lastTerm: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}
	s := w.buildStatus(w.pod.Status)
	if s.Phase != corev1.PodRunning {
		t.Fatalf("phase of a restarting pod = %s, want Running (as kubelet reports)", s.Phase)
	}
	if condition(s, corev1.PodReady) != corev1.ConditionFalse {
		t.Fatalf("Ready = %s, want False", condition(s, corev1.PodReady))
	}
	cs := s.ContainerStatuses[0]
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.RestartCount != 3 ||
		cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 2 {
		t.Fatalf("container status %+v", cs)
	}
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
		if s.Phase != tc.want || s.ContainerStatuses[0].State.Terminated == nil {
			t.Errorf("exit %d: phase %s state %+v, want %s and terminated", tc.code, s.Phase, s.ContainerStatuses[0].State, tc.want)
		}
	}
}

func TestStatusPatchIsGuardedByUIDAndKeepsOthersConditions(t *testing.T) {
	w := statusWorker(corev1.RestartPolicyAlways)
	w.runs["op"] = &containerRun{name: "op", everStarted: true, ready: true, started: true,
		proc: &containerProcess{pid: 7, started: time.Now()}}
	patch, err := statusPatch(w.pod, w.buildStatus(w.pod.Status))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		t.Fatal(err)
	}
	if m["metadata"].(map[string]any)["uid"] != "uid-1" {
		t.Fatalf("patch %s lacks the uid precondition", patch)
	}
	// Apply it as the apiserver would and check nothing we do not own is lost.
	old, _ := json.Marshal(w.pod)
	merged, err := strategicpatch.StrategicMergePatch(old, patch, corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(merged, &got); err != nil {
		t.Fatal(err)
	}
	if condition(got.Status, corev1.PodScheduled) != corev1.ConditionTrue || condition(got.Status, corev1.PodReady) != corev1.ConditionTrue {
		t.Fatalf("patched conditions %+v, want PodScheduled kept and Ready added", got.Status.Conditions)
	}
}
