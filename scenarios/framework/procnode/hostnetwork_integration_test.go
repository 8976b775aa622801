package procnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestHostNetworkFallback runs a node the way it runs without root: pods on the host
// network with pod IP 127.0.0.1, volumes left in the state dir, and a Service proxy that
// selects pods itself because EndpointSlices refuse loopback addresses.
func TestHostNetworkFallback(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	nodeName := testNodeName + "-host"
	_, svcCIDR, _ := net.ParseCIDR(testServiceCIDR)
	kubeletPort, err := freePort()
	require.NoError(t, err)
	stateDir := t.TempDir()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	ready := filepath.Join(stateDir, "ready")
	go func() {
		done <- Run(runCtx, Config{
			RESTConfig: c.cfg, NodeName: nodeName, StateDir: stateDir, ImagesFile: c.imagesFile,
			ServiceCIDR: svcCIDR, KubeletPort: kubeletPort, Network: NetworkHost, ReadyFile: ready,
		})
	}()
	defer func() {
		stop()
		require.NoError(t, <-done, "host-network node returned")
	}()
	eventually(t, 30*time.Second, "the host-network node to be ready", func() (bool, string) {
		_, err := os.Stat(ready)
		return err == nil, ""
	})

	podPort, err := freePort()
	require.NoError(t, err)
	pod := simplePod("hostnet", testImage+":v1", "-listen", "127.0.0.1:"+strconv.Itoa(podPort))
	pod.Spec.NodeName = nodeName
	pod.Labels = map[string]string{"app": "hostnet"}
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: clampInt32(podPort)}}
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
		PeriodSeconds: 1,
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "hostnet-config"}}}} //nolint:gosec // G101: the name of a Kubernetes Secret, not a credential
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/unused"}}
	mustSucceed(t, objErr(c.client.CoreV1().Secrets(testNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hostnet-config"}, Data: map[string][]byte{"greeting": []byte("hello")},
	}, metav1.CreateOptions{})))
	mustSucceed(t, objErr(c.client.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{})))
	running := waitForPod(t, c, "hostnet", 60*time.Second, "Ready on the host network", isPodReady)
	require.Equal(t, "127.0.0.1", running.Status.PodIP, "pod IP %q, want 127.0.0.1 on the host network", running.Status.PodIP)
	base := "http://127.0.0.1:" + strconv.Itoa(podPort)
	env, err := httpGet(base + "/env")
	require.NoError(t, err)
	volDir := filepath.Join(stateDir, "pods", string(running.UID), "volumes", "config")
	require.True(t, containsLine(env, "GAUNTLET_VOLUME_CONFIG="+volDir), "env lacks GAUNTLET_VOLUME_CONFIG=%s:\n%s", volDir, env)
	got, err := httpGet(base + "/file?path=" + volDir + "/greeting")
	require.NoError(t, err, "volume file through GAUNTLET_VOLUME_CONFIG = %q, %v", got, err)
	require.Equal(t, "hello", got, "volume file through GAUNTLET_VOLUME_CONFIG = %q, %v", got, err)

	svc, err := c.client.CoreV1().Services(testNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hostnet"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "hostnet"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8081, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "8081")
	eventually(t, 20*time.Second, "the Service to reach the host-network pod", func() (bool, string) {
		body, err := httpGet("http://" + addr + "/healthz")
		return err == nil && body == "ok", body
	})
	deletePodAndWait(t, c, "hostnet")
	eventually(t, 20*time.Second, "the Service to refuse connections", func() (bool, string) {
		_, err := httpGet("http://" + addr + "/healthz")
		return err != nil && strings.HasSuffix(err.Error(), "connect: connection refused"), fmt.Sprint(err)
	})
}
