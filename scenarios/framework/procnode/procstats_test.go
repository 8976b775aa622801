package procnode

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// memoryHogReadyEnv names the file TestMemoryHogHelper writes once its memory is resident;
// unset, the helper is not a test of its own and does nothing.
const memoryHogReadyEnv = "PROCNODE_TEST_MEMORY_HOG_READY"

const hogBytes = 64 << 20

// TestMemoryHogHelper is the child process of TestContainerMemoryCountsDescendants: it makes
// 64 MiB resident, says so, and waits to be killed.
func TestMemoryHogHelper(t *testing.T) {
	ready := os.Getenv(memoryHogReadyEnv)
	if ready == "" {
		t.Skip("helper process of TestContainerMemoryCountsDescendants")
	}
	buf := make([]byte, hogBytes)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1 // an untouched page is not resident
	}
	require.NoError(t, os.WriteFile(ready, []byte("ready"), 0o600)) //nolint:gosec // G703: the file the parent test names in its own temp directory
	time.Sleep(time.Minute)
	runtime.KeepAlive(buf)
}

// startProcessTree starts `sh` (small) whose child is this test binary holding 64 MiB, in
// their own process group as a container's are, and waits until the memory is resident.
func startProcessTree(t *testing.T) int {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command("sh", "-c", `"$0" -test.run='^TestMemoryHogHelper$' & wait`, os.Args[0]) //nolint:gosec // G204: this test binary
	cmd.Env = append(os.Environ(), memoryHogReadyEnv+"="+ready)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			return cmd.Process.Pid
		}
		require.True(t, time.Now().Before(deadline), "the child of sh (pid %d) did not report its %d MiB resident within 30s", cmd.Process.Pid, hogBytes>>20)
		time.Sleep(50 * time.Millisecond)
	}
}

func TestContainerMemoryCountsDescendants(t *testing.T) {
	pid := startProcessTree(t)
	own, err := residentBytes(pid)
	require.NoError(t, err)
	require.Less(t, own, uint64(hogBytes/2), "precondition: sh (pid %d) itself should be small, has %d MiB resident", pid, own>>20)

	table, err := readProcessTable()
	require.NoError(t, err)
	u, err := table.usage(pid)
	require.NoError(t, err)
	require.GreaterOrEqual(t, u.rssBytes, uint64(hogBytes),
		"container memory of pid %d = %d MiB, want ≥ %d MiB: its child holds %d MiB, so the sum must cover descendants (sh alone: %d MiB; process tree seen: %v)",
		pid, u.rssBytes>>20, hogBytes>>20, hogBytes>>20, own>>20, table.tree(pid))
}

func TestStatsSummaryListsRunningContainers(t *testing.T) {
	sleep := exec.Command("sleep", "30")
	require.NoError(t, sleep.Start())
	t.Cleanup(func() {
		_ = sleep.Process.Kill()
		_ = sleep.Wait()
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: "waiting"}}},
	}
	started := time.Now().Add(-time.Minute)
	w := &podWorker{uid: pod.UID, pod: pod, startTime: metav1.NewTime(started).Rfc3339Copy(), runs: map[string]*containerRun{
		"app":     {name: "app", proc: &containerProcess{pid: sleep.Process.Pid, started: started, done: make(chan struct{})}},
		"waiting": {name: "waiting"},
	}}
	w.publishRunning()
	n := &node{cfg: Config{NodeName: "node-a"}, workers: map[string]*podWorker{string(pod.UID): w}}

	rec := httptest.NewRecorder()
	n.serveStatsSummary(rec, httptest.NewRequest(http.MethodGet, "/stats/summary", nil))
	require.Equal(t, http.StatusOK, rec.Code, "GET /stats/summary: %s", rec.Body)
	var got statsv1alpha1.Summary
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got), "decoding %s", rec.Body)

	require.Equal(t, "node-a", got.Node.NodeName)
	require.Len(t, got.Pods, 1, "pods in the summary: %+v", got.Pods)
	p := got.Pods[0]
	require.Equal(t, statsv1alpha1.PodReference{Name: "web", Namespace: "shop", UID: "uid-1"}, p.PodRef)
	require.Len(t, p.Containers, 1, "containers of shop/web: %+v (the waiting one has no process and is left out)", p.Containers)
	c := p.Containers[0]
	require.Equal(t, "app", c.Name)
	require.Equal(t, started.Unix(), c.StartTime.Unix(), "container startTime")
	require.NotNil(t, c.Memory, "container app has no memory stats")
	require.NotNil(t, c.Memory.WorkingSetBytes, "container app has no workingSetBytes")
	require.NotZero(t, *c.Memory.WorkingSetBytes, "workingSetBytes of a running sleep")
	require.Equal(t, c.Memory.WorkingSetBytes, c.Memory.RSSBytes, "workingSetBytes and rssBytes are the same sum")
	require.Equal(t, c.Memory.WorkingSetBytes, c.Memory.UsageBytes, "workingSetBytes and usageBytes are the same sum")
	require.NotNil(t, c.CPU, "container app has no cpu stats")
	require.NotNil(t, c.CPU.UsageCoreNanoSeconds, "container app has no usageCoreNanoSeconds")
}
