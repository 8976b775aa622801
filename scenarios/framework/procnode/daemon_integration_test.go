package procnode

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestDaemonBinary runs the real gauntlet-node binary the way the local provider does
// (flags from CONTRACT.md, detached, SIGTERM to stop) and runs a pod on it, so the
// binary's own re-exec as pod init is covered, not just the test binary's.
func TestDaemonBinary(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "gauntlet-node")
	out, err := exec.Command("go", "build", "-o", bin, "../../tools/cmd/gauntlet-node").CombinedOutput() //nolint:gosec // G204: go build of the node daemon into t.TempDir()
	require.NoError(t, err, "building gauntlet-node\n%s", out)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, writeKubeconfig(c.cfg, kubeconfig))
	port, err := freePort()
	require.NoError(t, err)
	stateDir, ready := filepath.Join(dir, "state"), filepath.Join(dir, "ready")
	logFile, err := os.Create(filepath.Join(dir, "gauntlet-node.log")) //nolint:gosec // G304: a log file under t.TempDir()
	require.NoError(t, err)
	defer func() { _ = logFile.Close() }() // the daemon's log, only read back on failure
	//nolint:gosec // G204: the daemon binary this test just built
	daemon := exec.Command(bin,
		"--kubeconfig", kubeconfig,
		"--node-name", daemonNodeName,
		"--state-dir", stateDir,
		"--images", c.imagesFile,
		"--service-cidr", testServiceCIDR,
		"--pod-cidr", daemonPodCIDR,
		"--kubelet-port", strconv.Itoa(port),
		"--apiserver-host-for-pods", daemonPodGateway,
		"--ready-file", ready,
	)
	daemon.Stdout, daemon.Stderr = logFile, logFile
	daemon.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, daemon.Start())
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	defer func() {
		if daemon.ProcessState == nil {
			_ = daemon.Process.Kill()
		}
	}()
	daemonLog := func() string { raw, _ := os.ReadFile(logFile.Name()); return string(raw) }

	eventually(t, 30*time.Second, "the daemon's ready file", func() (bool, string) {
		_, err := os.Stat(ready)
		return err == nil, daemonLog()
	})
	node, err := c.client.CoreV1().Nodes().Get(ctx, daemonNodeName, metav1.GetOptions{})
	require.NoError(t, err, "node %s: %v ready=%v", daemonNodeName, err, err == nil && nodeReady(node))
	require.True(t, nodeReady(node), "node %s: %v ready=%v", daemonNodeName, err, err == nil && nodeReady(node))

	pod := simplePod("daemon-web", testImage+":v2")
	pod.Spec.NodeName = daemonNodeName
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
		PeriodSeconds: 1,
	}
	mustSucceed(t, objErr(c.client.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{})))
	running := waitForPod(t, c, "daemon-web", 60*time.Second, "Ready on the daemon's node", isPodReady)
	_, daemonNet, _ := net.ParseCIDR(daemonPodCIDR)
	require.True(t, daemonNet.Contains(net.ParseIP(running.Status.PodIP)), "pod IP %s not from the daemon's pod CIDR %s", running.Status.PodIP, daemonPodCIDR)
	// The default ServiceAccount's token reaches the apiserver through the daemon's forwarder.
	review := `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
	body, code := podGetStatus(t, running, "/apiserver?method=POST&path="+url.QueryEscape("/apis/authentication.k8s.io/v1/selfsubjectreviews")+"&body="+url.QueryEscape(review))
	require.Equal(t, http.StatusCreated, code, "SelfSubjectReview from a pod of the daemon: %d %s", code, body)
	require.Contains(t, body, "system:serviceaccount:"+testNamespace+":default", "SelfSubjectReview from a pod of the daemon: %d %s", code, body)
	pid := containerPID(t, running)

	require.NoError(t, daemon.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "daemon exited with %v on SIGTERM\n%s", err, daemonLog())
	case <-time.After(15 * time.Second):
		require.Failf(t, "daemon did not exit within 15s of SIGTERM (the provider's budget)", "%s", daemonLog())
	}
	_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
	assert.True(t, os.IsNotExist(err), "pod process %d survived the daemon", pid)
	mounts := mountsUnder(t, stateDir)
	assert.Empty(t, mounts, "mounts survived the daemon: %v", mounts)
	for _, p := range []string{filepath.Join(stateDir, "pods"), filepath.Join(stateDir, "netns"), ready} {
		_, err := os.Stat(p)
		assert.True(t, os.IsNotExist(err), "%s survived the daemon", p)
	}
	node, err = c.client.CoreV1().Nodes().Get(ctx, daemonNodeName, metav1.GetOptions{})
	require.NoError(t, err, "node %s after the daemon stopped: %v, still Ready=%v", daemonNodeName, err, err == nil && nodeReady(node))
	assert.False(t, nodeReady(node), "node %s after the daemon stopped: %v, still Ready=%v", daemonNodeName, err, err == nil && nodeReady(node))
	_ = c.client.CoreV1().Pods(testNamespace).Delete(ctx, "daemon-web", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
}
