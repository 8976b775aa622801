package procnode

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeRunning is a node with one pod whose container app is the process tree of cmd, limited
// to limit of memory ("" for none).
func nodeRunning(t *testing.T, limit string) (*node, *containerProcess) {
	t.Helper()
	cmd := startProcessTree(t)
	p := &containerProcess{cmd: cmd, pid: cmd.Process.Pid, started: time.Now(), done: make(chan struct{})}
	go p.wait()
	app := corev1.Container{Name: "app"}
	if limit != "" {
		app.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{app}},
	}
	w := &podWorker{uid: pod.UID, pod: pod, runs: map[string]*containerRun{"app": {name: "app", proc: p}}}
	w.publishRunning()
	return &node{cfg: Config{NodeName: "node-a"}, workers: map[string]*podWorker{string(pod.UID): w}}, p
}

func TestAContainerOverItsMemoryLimitIsKilledAsOOMKilled(t *testing.T) {
	n, p := nodeRunning(t, "32Mi") // its tree holds 64 MiB
	n.killOverLimit()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("a container holding %d MiB with limits.memory 32Mi still runs 10 s after the node looked at it", hogBytes>>20)
	}
	code, reason, _ := p.exited()
	require.Equal(t, "OOMKilled", reason, "the reason kubelet reports for a container the OOM killer ended")
	require.Equal(t, int32(137), code, "128 + SIGKILL")
}

func TestAContainerWithinItsMemoryLimitOrWithoutOneRunsOn(t *testing.T) {
	for _, limit := range []string{"1Gi", ""} {
		n, p := nodeRunning(t, limit)
		n.killOverLimit()
		select {
		case <-p.done:
			code, reason, _ := p.exited()
			t.Fatalf("a container holding %d MiB with limits.memory %q was ended (%d, %s)", hogBytes>>20, limit, code, reason)
		case <-time.After(time.Second):
		}
	}
}
