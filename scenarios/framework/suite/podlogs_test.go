package suite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A rollout replaces the operator's pods, and a kubelet deletes their logs with them: the
// recorder keeps one file per container run of every pod it is interested in, as the runs start.
func TestRecordPodLogsKeepsEveryRunOfThePodsItWatches(t *testing.T) {
	kube := fake.NewClientset()
	dir := t.TempDir()
	var logged []string
	stop := recordPodLogs(kube, dir, logsWorthRecording("gatekeeper-system"), func(f string, a ...any) { logged = append(logged, f) })

	ctx := context.Background()
	pod := func(ns, name string, labels map[string]string, restarts int32) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
				Name: "manager", RestartCount: restarts,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			}}},
		}
	}
	operator := pod("dynamo-system", "dynamo-operator-1", map[string]string{"app.kubernetes.io/name": "dynamo-operator"}, 0)
	_, err := kube.CoreV1().Pods("dynamo-system").Create(ctx, operator, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().Pods("gatekeeper-system").Create(ctx, pod("gatekeeper-system", "gatekeeper-controller-manager-1", nil, 0), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().Pods("default").Create(ctx, pod("default", "unrelated", map[string]string{"app": "x"}, 0), metav1.CreateOptions{})
	require.NoError(t, err)

	want := []string{
		"dynamo-system_dynamo-operator-1_manager_0.log",
		"gatekeeper-system_gatekeeper-controller-manager-1_manager_0.log",
	}
	waitForFiles(t, dir, want)

	// The container restarts: its next run gets a file of its own; the first one stays.
	operator.Status.ContainerStatuses[0].RestartCount = 1
	_, err = kube.CoreV1().Pods("dynamo-system").UpdateStatus(ctx, operator, metav1.UpdateOptions{})
	require.NoError(t, err)
	want = append(want, "dynamo-system_dynamo-operator-1_manager_1.log")
	waitForFiles(t, dir, want)

	stop()
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, f.Name())
		content, err := os.ReadFile(filepath.Join(dir, f.Name())) //nolint:gosec // G304: the test's own temporary directory
		require.NoError(t, err)
		require.Equal(t, "fake logs", string(content), "the log the API server streamed for %s", f.Name())
	}
	require.ElementsMatch(t, want, names, "the pod in namespace default is neither the operator's, cert-manager's nor the target's")
	require.Empty(t, logged)
}

func waitForFiles(t *testing.T, dir string, names []string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "expected the recorder to write %v in %s", names, dir)
}
