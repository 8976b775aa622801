package release

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// rollout is a Deployment at revision 2 with its ReplicaSets of revisions 1 (hash "old") and 2
// (hash "new"), never Available, and one pod per ReplicaSet.
func rollout(newPod, oldPod corev1.ContainerStatus) []runtime.Object {
	labels := map[string]string{"app": "op"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "op", Namespace: "ns", UID: "d-uid", Annotations: map[string]string{"deployment.kubernetes.io/revision": "2"}},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	controller := true
	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "op", UID: d.UID, Controller: &controller}}
	objs := []runtime.Object{d}
	for rev, hash := range map[string]string{"1": "old", "2": "new"} {
		l := map[string]string{"app": "op", appsv1.DefaultDeploymentUniqueLabelKey: hash}
		objs = append(objs, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "op-" + hash, Namespace: "ns", Labels: l,
			Annotations: map[string]string{"deployment.kubernetes.io/revision": rev}, OwnerReferences: owner}})
		status := oldPod
		if hash == "new" {
			status = newPod
		}
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "op-" + hash + "-x", Namespace: "ns", Labels: l},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{status}}})
	}
	return objs
}

func crashLoopingStatus(restarts int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "operator", RestartCount: restarts,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}
}

var running = corev1.ContainerStatus{Name: "operator", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}

func TestWaitDeploymentAvailableEndsAtACrashLoop(t *testing.T) {
	kube := fake.NewClientset(rollout(crashLoopingStatus(CrashLoopRestarts), running)...)
	start := time.Now()
	err := WaitDeploymentAvailable(context.Background(), kube, "ns", "op", time.Minute)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second, "the wait ends at once, not at its timeout")
	assert.Contains(t, err.Error(), "waiting for Deployment ns/op to be Available: pod ns/op-new-x is crash-looping: container operator restarted 3 times (last exit code 1, Error); the end of its last run's log:\nfake logs")
}

func TestWaitDeploymentAvailableWaitsOutOtherRestarts(t *testing.T) {
	for name, objs := range map[string][]runtime.Object{
		"fewer restarts than CrashLoopRestarts":   rollout(crashLoopingStatus(CrashLoopRestarts-1), running),
		"a crash-looping pod of the old revision": rollout(running, crashLoopingStatus(10)),
	} {
		t.Run(name, func(t *testing.T) {
			err := WaitDeploymentAvailable(context.Background(), fake.NewClientset(objs...), "ns", "op", time.Second)
			require.Error(t, err)
			assert.Regexp(t, `^waited [0-9.]+s for Deployment ns/op to be Available; last seen:`, err.Error(), "the wait runs to its timeout")
		})
	}
}
