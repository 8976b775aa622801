package procnode

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

func TestProcessNode(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()

	t.Run("registers a Ready node with a renewed lease", func(t *testing.T) {
		node, err := c.client.CoreV1().Nodes().Get(ctx, testNodeName, metav1.GetOptions{})
		require.NoError(t, err)
		require.True(t, nodeReady(node), "node %s is not Ready: %+v", testNodeName, node.Status.Conditions)
		got := node.Status.DaemonEndpoints.KubeletEndpoint.Port
		require.NotZero(t, got, "kubelet endpoint port not published")
		lease, err := c.client.CoordinationV1().Leases(nodeLeaseNamespace).Get(ctx, testNodeName, metav1.GetOptions{})
		require.NoError(t, err, "node lease")
		require.NotNil(t, lease.Spec.RenewTime, "node lease not renewed recently: %v", lease.Spec.RenewTime)
		require.LessOrEqual(t, time.Since(lease.Spec.RenewTime.Time), 2*leaseRenewInterval, "node lease not renewed recently: %v", lease.Spec.RenewTime)
	})

	mustSucceed(t, objErr(c.client.CoreV1().Secrets(testNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "podserver-config"},
		Data:       map[string][]byte{"greeting": []byte("hello")},
	}, metav1.CreateOptions{})))
	mustSucceed(t, objErr(c.client.CoreV1().ServiceAccounts(testNamespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "podserver"},
	}, metav1.CreateOptions{})))
	mustSucceed(t, objErr(c.client.CoreV1().Pods(testNamespace).Create(ctx, webPod(), metav1.CreateOptions{})))
	web := waitForPod(t, c, "web", 60*time.Second, "Ready", isPodReady)

	t.Run("runs the container as a process in its own network namespace", func(t *testing.T) {
		_, podNet, _ := net.ParseCIDR(testPodCIDR)
		ip := net.ParseIP(web.Status.PodIP)
		require.NotNil(t, ip, "pod IP %q is not a pod address in %s", web.Status.PodIP, testPodCIDR)
		require.True(t, podNet.Contains(ip), "pod IP %q is not a pod address in %s", web.Status.PodIP, testPodCIDR)
		require.NotEqual(t, testPodGateway, ip.String(), "pod IP %q is not a pod address in %s", web.Status.PodIP, testPodCIDR)
		cs := web.Status.ContainerStatuses[0]
		require.False(t, !cs.Ready || cs.State.Running == nil || cs.RestartCount != 0, "container status = %+v, want running, ready, no restarts", cs)
		got := podGet(t, web, "/hostname")
		require.Equal(t, "web", got, "hostname in the pod = %q, want the pod name", got)
		for _, cond := range []corev1.PodConditionType{corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodReadyToStartContainers} {
			assert.True(t, hasCondition(web, cond), "pod condition %s is not True: %+v", cond, web.Status.Conditions)
		}
	})

	t.Run("resolves env including the downward API and secretKeyRef", func(t *testing.T) {
		env := podGet(t, web, "/env")
		for _, want := range []string{
			"POD_NAME=web",
			"POD_NAMESPACE=" + testNamespace,
			"POD_IP=" + web.Status.PodIP,
			"SA_NAME=podserver",
			"GREETING=hello",
			"GREETING_TWICE=hello hello",
			"KUBERNETES_SERVICE_HOST=" + testPodGateway,
		} {
			assert.True(t, containsLine(env, want), "env lacks %q:\n%s", want, env)
		}
	})

	t.Run("mounts volumes at their mountPath in a private mount namespace", func(t *testing.T) {
		got := podGet(t, web, "/file?path="+url.QueryEscape(configMountPath+"/greeting"))
		require.Equal(t, "hello", got, "secret file in the pod = %q, want hello", got)
		_, err := os.Stat(filepath.Join(configMountPath, "greeting"))
		require.True(t, os.IsNotExist(err), "the secret is visible on the host at %s (stat err %v); mounts must stay in the pod", configMountPath, err)
		_, code := podGetStatus(t, web, "/readlink?path="+url.QueryEscape(optionalMountPath+"/..data"))
		require.Equal(t, http.StatusOK, code, "optional volume of a missing Secret is not an (empty) volume: status %d", code)
		_, code = podGetStatus(t, web, "/file?path="+url.QueryEscape(optionalMountPath+"/anything"))
		require.Equal(t, http.StatusNotFound, code, "optional volume of a missing Secret has content: status %d", code)
	})

	t.Run("secret update reaches the mounted files atomically", func(t *testing.T) {
		before := podGet(t, web, "/readlink?path="+url.QueryEscape(configMountPath+"/..data"))
		sec, err := c.client.CoreV1().Secrets(testNamespace).Get(ctx, "podserver-config", metav1.GetOptions{})
		require.NoError(t, err)
		sec.Data["greeting"] = []byte("bonjour")
		_, err = c.client.CoreV1().Secrets(testNamespace).Update(ctx, sec, metav1.UpdateOptions{})
		require.NoError(t, err)
		eventually(t, 20*time.Second, "the mounted secret to read bonjour", func() (bool, string) {
			got := podGet(t, web, "/file?path="+url.QueryEscape(configMountPath+"/greeting"))
			return got == "bonjour", got
		})
		after := podGet(t, web, "/readlink?path="+url.QueryEscape(configMountPath+"/..data"))
		require.NotEqual(t, before, after, "..data was not swapped to a new timestamped dir: before %q after %q", before, after)
		require.True(t, strings.HasPrefix(after, ".."), "..data was not swapped to a new timestamped dir: before %q after %q", before, after)
		_, code := podGetStatus(t, web, "/readlink?path="+url.QueryEscape(configMountPath+"/greeting"))
		require.Equal(t, http.StatusOK, code, "user-visible file is not a symlink through ..data")
	})

	t.Run("pod authenticates as its ServiceAccount and RBAC is enforced", func(t *testing.T) {
		review := `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
		body, code := podGetStatus(t, web, "/apiserver?method=POST&path="+url.QueryEscape("/apis/authentication.k8s.io/v1/selfsubjectreviews")+"&body="+url.QueryEscape(review))
		require.Equal(t, http.StatusCreated, code, "SelfSubjectReview from the pod: status %d body %s", code, body)
		require.Contains(t, body, "system:serviceaccount:"+testNamespace+":podserver", "SelfSubjectReview from the pod: status %d body %s", code, body)
		listSecrets := "/apiserver?method=GET&path=" + url.QueryEscape("/api/v1/namespaces/"+testNamespace+"/secrets")
		body, code = podGetStatus(t, web, listSecrets)
		require.Equal(t, http.StatusForbidden, code, "listing secrets without a Role: status %d body %s, want 403 forbidden", code, body)
		require.Contains(t, body, "forbidden", "listing secrets without a Role: status %d body %s, want 403 forbidden", code, body)
		mustSucceed(t, objErr(c.client.RbacV1().Roles(testNamespace).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "read-secrets"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}},
		}, metav1.CreateOptions{})))
		mustSucceed(t, objErr(c.client.RbacV1().RoleBindings(testNamespace).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "read-secrets"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "read-secrets"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "podserver", Namespace: testNamespace}},
		}, metav1.CreateOptions{})))
		eventually(t, 20*time.Second, "listing secrets to be allowed after the RoleBinding", func() (bool, string) {
			body, code := podGetStatus(t, web, listSecrets)
			return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
		})
	})

	svc, err := c.client.CoreV1().Services(testNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	serviceAddr := net.JoinHostPort(svc.Spec.ClusterIP, "80")

	t.Run("a Service on ClusterIP:port reaches the pod from the host", func(t *testing.T) {
		_, svcNet, _ := net.ParseCIDR(testServiceCIDR)
		require.True(t, svcNet.Contains(net.ParseIP(svc.Spec.ClusterIP)), "ClusterIP %s not in %s", svc.Spec.ClusterIP, testServiceCIDR)
		eventually(t, 30*time.Second, "GET http://"+serviceAddr+"/hostname to answer", func() (bool, string) {
			body, err := httpGet("http://" + serviceAddr + "/hostname")
			return err == nil && body == "web", fmt.Sprintf("%q %v", body, err)
		})
	})

	t.Run("kubectl logs reaches the container output through the apiserver", func(t *testing.T) {
		raw, err := c.client.CoreV1().Pods(testNamespace).GetLogs("web", &corev1.PodLogOptions{Container: "podserver"}).DoRaw(ctx)
		require.NoError(t, err, "getting logs of pod web")
		require.Contains(t, string(raw), "podserver listening on :8080", "logs = %q, want the server's start line", raw)
		stream, err := c.client.CoreV1().Pods(testNamespace).GetLogs("web", &corev1.PodLogOptions{Container: "podserver", Follow: true}).Stream(ctx)
		require.NoError(t, err, "following logs of pod web")
		line, err := bufio.NewReader(stream).ReadString('\n')
		_ = stream.Close() // one line was all this test follows
		require.NoError(t, err, "first followed line = %q, %v", line, err)
		require.Contains(t, line, "podserver listening", "first followed line = %q, %v", line, err)
		// Anyone else is turned away: the kubelet API wants the apiserver's client cert.
		// It skips verifying the kubelet's certificate on purpose: the client certificate it
		// lacks is what must be refused.
		insecure := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // G402: see above
		if resp, err := insecure.Get(c.kubeletURL + "/containerLogs/" + testNamespace + "/web/podserver"); err == nil {
			_ = resp.Body.Close()
			require.Failf(t, "kubelet API served logs to a client without a certificate", "status %s", resp.Status)
		}
		tail := int64(1)
		raw, err = c.client.CoreV1().Pods(testNamespace).GetLogs("web", &corev1.PodLogOptions{Container: "podserver", TailLines: &tail}).DoRaw(ctx)
		require.NoError(t, err, "tailLines=1 logs = %q, %v", raw, err)
		require.Equal(t, 1, strings.Count(string(raw), "\n"), "tailLines=1 logs = %q, %v", raw, err)
	})

	t.Run("the kubelet API's stats summary has the container's memory", func(t *testing.T) {
		// Straight to the node, with the client certificate the apiserver uses, as the local
		// provider's NodeStats does: the apiserver's node proxy refuses nodes whose address is
		// loopback ("address not allowed"), and this node's is 127.0.0.1 (see CONTRACT.md).
		cert, err := tls.LoadX509KeyPair(filepath.Join(c.tmp, "apiserver-certs", "kubelet-client.crt"), filepath.Join(c.tmp, "apiserver-certs", "kubelet-client.key"))
		require.NoError(t, err)
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}}} //nolint:gosec // G402: as the apiserver, which has no --kubelet-certificate-authority
		resp, err := client.Get(c.kubeletURL + "/stats/summary")
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		require.Equal(t, http.StatusOK, resp.StatusCode, "GET /stats/summary")
		var summary statsv1alpha1.Summary
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&summary))
		var mem *uint64
		for _, p := range summary.Pods {
			if p.PodRef.Namespace == testNamespace && p.PodRef.Name == "web" && len(p.Containers) == 1 && p.Containers[0].Memory != nil {
				mem = p.Containers[0].Memory.WorkingSetBytes
			}
		}
		require.NotNil(t, mem, "no workingSetBytes of web's container in the summary: %+v", summary.Pods)
		// A Go HTTP server has its runtime and heap resident: a few MiB at the least.
		require.GreaterOrEqual(t, *mem, uint64(1<<20), "working set of web/podserver = %d bytes, want ≥ 1 MiB", *mem)
	})

	t.Run("a crashing container restarts with back-off", func(t *testing.T) {
		pod := simplePod("crasher", testImage+":v1", "-exit", "3")
		mustSucceed(t, objErr(c.client.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{})))
		sawBackOff := false
		p := waitForPod(t, c, "crasher", 60*time.Second, "two restarts after CrashLoopBackOff", func(p *corev1.Pod) bool {
			if len(p.Status.ContainerStatuses) == 0 {
				return false
			}
			cs := p.Status.ContainerStatuses[0]
			if cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" {
				sawBackOff = true
			}
			return sawBackOff && cs.RestartCount >= 2
		})
		last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
		require.NotNil(t, last, "lastState.terminated = %+v, want exit code 3 (Error)", last)
		require.Equal(t, int32(3), last.ExitCode, "lastState.terminated = %+v, want exit code 3 (Error)", last)
		require.Equal(t, "Error", last.Reason, "lastState.terminated = %+v, want exit code 3 (Error)", last)
		require.Equal(t, corev1.PodRunning, p.Status.Phase, "phase of a restarting pod = %s, want Running", p.Status.Phase)
		raw, err := c.client.CoreV1().Pods(testNamespace).GetLogs("crasher", &corev1.PodLogOptions{Previous: true}).DoRaw(ctx)
		require.NoError(t, err, "previous logs = %q, %v", raw, err)
		require.Contains(t, string(raw), "podserver exiting with 3", "previous logs = %q, %v", raw, err)
		deletePodAndWait(t, c, "crasher")
	})

	t.Run("a failing liveness probe restarts the container", func(t *testing.T) {
		pod := simplePod("unlively", testImage+":v1")
		pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9999)}},
			PeriodSeconds:    1,
			FailureThreshold: 1,
		}
		mustSucceed(t, objErr(c.client.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{})))
		waitForPod(t, c, "unlively", 60*time.Second, "a restart", func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount >= 1
		})
		waitForEvent(t, c, "unlively", "Killing", "failed liveness probe")
		deletePodAndWait(t, c, "unlively")
	})

	t.Run("a missing non-optional Secret holds the pod in ContainerCreating", func(t *testing.T) {
		pod := simplePod("waiter", testImage+":v1")
		pod.Spec.Volumes = []corev1.Volume{{Name: "later", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "later"}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "later", MountPath: mountRoot + "/later"}}
		mustSucceed(t, objErr(c.client.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{})))
		waitForEvent(t, c, "waiter", "FailedMount", `MountVolume.SetUp failed for volume "later" : secrets "later" not found`)
		p, err := c.client.CoreV1().Pods(testNamespace).Get(ctx, "waiter", metav1.GetOptions{})
		require.NoError(t, err)
		msg := []any{"pod with a missing Secret: phase %s statuses %+v, want Pending/ContainerCreating", p.Status.Phase, p.Status.ContainerStatuses}
		require.Equal(t, corev1.PodPending, p.Status.Phase, msg...)
		require.NotEmpty(t, p.Status.ContainerStatuses, msg...)
		require.NotNil(t, p.Status.ContainerStatuses[0].State.Waiting, msg...)
		require.Equal(t, "ContainerCreating", p.Status.ContainerStatuses[0].State.Waiting.Reason, msg...)
		mustSucceed(t, objErr(c.client.CoreV1().Secrets(testNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "later"}, Data: map[string][]byte{"k": []byte("v")},
		}, metav1.CreateOptions{})))
		waitForPod(t, c, "waiter", 30*time.Second, "Ready once the Secret exists", isPodReady)
		deletePodAndWait(t, c, "waiter")
	})

	t.Run("an unmapped image is reported with the image and the map file", func(t *testing.T) {
		pod := simplePod("unmapped", "example.com/not-mapped:1.0")
		mustSucceed(t, objErr(c.client.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{})))
		p := waitForPod(t, c, "unmapped", 30*time.Second, "ImageNotMapped", func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
				p.Status.ContainerStatuses[0].State.Waiting.Reason == "ImageNotMapped"
		})
		msg := p.Status.ContainerStatuses[0].State.Waiting.Message
		require.Contains(t, msg, `"example.com/not-mapped:1.0"`, "ImageNotMapped message %q names neither the image nor the map file %s", msg, c.imagesFile)
		require.Contains(t, msg, c.imagesFile, "ImageNotMapped message %q names neither the image nor the map file %s", msg, c.imagesFile)
		deletePodAndWait(t, c, "unmapped")
	})

	t.Run("an unscheduled pod is bound when no scheduler places it", func(t *testing.T) {
		pod := simplePod("unscheduled", testImage+":v1")
		pod.Spec.NodeName = ""
		mustSucceed(t, objErr(c.client.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{})))
		p := waitForPod(t, c, "unscheduled", 30*time.Second, "bound and running", func(p *corev1.Pod) bool {
			return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning
		})
		require.Equal(t, testNodeName, p.Spec.NodeName, "bound to %q, want %s", p.Spec.NodeName, testNodeName)
		deletePodAndWait(t, c, "unscheduled")
	})

	t.Run("Deployment scaling and rollout restart work through kube-controller-manager", func(t *testing.T) {
		deployments := c.client.AppsV1().Deployments(testNamespace)
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "fleet"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(2)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fleet"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "fleet"}},
					Spec:       simplePod("", testImage+":v1").Spec,
				},
			},
		}
		mustSucceed(t, objErr(deployments.Create(ctx, d, metav1.CreateOptions{})))
		before := waitForFleet(t, c, 2)
		// kubectl rollout restart: a template annotation change.
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339))
		mustSucceed(t, objErr(deployments.Patch(ctx, "fleet", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})))
		eventually(t, 60*time.Second, "the rollout to replace both pods", func() (bool, string) {
			now := fleetPods(t, c)
			for uid := range before {
				if _, ok := now[uid]; ok {
					return false, fmt.Sprintf("old pod %s still there", uid)
				}
			}
			return len(now) == 2 && allRunning(now), fmt.Sprintf("%d pods", len(now))
		})
		for _, pid := range before {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			assert.True(t, os.IsNotExist(err), "process %d of a replaced pod still exists", pid)
		}
		mustSucceed(t, objErr(deployments.Patch(ctx, "fleet", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{})))
		eventually(t, 60*time.Second, "scale to 0 to remove every pod", func() (bool, string) {
			n := len(fleetPods(t, c))
			return n == 0, fmt.Sprintf("%d pods left", n)
		})
	})

	t.Run("deleting the pod kills the process and the Service refuses connections", func(t *testing.T) {
		pid := containerPID(t, web)
		deletePodAndWait(t, c, "web")
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		require.True(t, os.IsNotExist(err), "process %d of the deleted pod still exists", pid)
		eventually(t, 20*time.Second, "dialing "+serviceAddr+" to be refused", func() (bool, string) {
			conn, err := net.DialTimeout("tcp", serviceAddr, 2*time.Second)
			if err == nil {
				_ = conn.Close() // connecting at all is the finding
				return false, "connected"
			}
			return strings.HasSuffix(err.Error(), "connect: connection refused"), err.Error()
		})
	})

	t.Run("stopping the node leaves nothing behind", func(t *testing.T) {
		// A pod still running at shutdown must be stopped by the node itself.
		mustSucceed(t, objErr(c.client.CoreV1().Pods(testNamespace).Create(ctx, webPod(), metav1.CreateOptions{})))
		running := waitForPod(t, c, "web", 60*time.Second, "Ready", isPodReady)
		pid := containerPID(t, running)
		veth, _ := vethNames(testNodeName, string(running.UID))
		require.NoError(t, c.stopNodeAndWait(), "process node returned")
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		assert.True(t, os.IsNotExist(err), "pod process %d survived the node", pid)
		for _, link := range []string{bridgeNameFor(testNodeName), veth} {
			_, err := netlink.LinkByName(link)
			require.Error(t, err, "link %s survived the node", link)
		}
		for _, p := range []string{configMountPath, optionalMountPath, mountRoot, scratchMountPath,
			filepath.Join(c.stateDir, "pods"), filepath.Join(c.stateDir, "netns")} {
			_, err := os.Stat(p)
			assert.True(t, os.IsNotExist(err), "%s survived the node (stat err %v)", p, err)
		}
		mounts := mountsUnder(t, c.stateDir)
		assert.Empty(t, mounts, "mounts survived the node: %v", mounts)
		_, svcNet, _ := net.ParseCIDR(testServiceCIDR)
		_, podNet, _ := net.ParseCIDR(testPodCIDR)
		for _, l := range tcpListeners(t) {
			assert.False(t, svcNet.Contains(l.IP), "listener %s survived the node", l)
			assert.False(t, podNet.Contains(l.IP), "listener %s survived the node", l)
		}
	})
}

func webPod() *corev1.Pod {
	pod := simplePod("web", testImage+":v1")
	pod.Labels = map[string]string{"app": "web"}
	pod.Spec.ServiceAccountName = "podserver"
	c := &pod.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	c.Env = []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "SA_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
		{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "podserver-config"}, Key: "greeting"}}},
		{Name: "GREETING_TWICE", Value: "$(GREETING) $(GREETING)"},
	}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
		PeriodSeconds: 1,
	}
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "config", MountPath: configMountPath},
		{Name: "optional", MountPath: optionalMountPath},
		{Name: "scratch", MountPath: scratchMountPath},
	}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "podserver-config"}}}, //nolint:gosec // G101: the name of a Kubernetes Secret, not a credential
		{Name: "optional", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent", Optional: ptr.To(true)}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	return pod
}

func simplePod(name, image string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec: corev1.PodSpec{
			NodeName:                      testNodeName,
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			Containers:                    []corev1.Container{{Name: "podserver", Image: image, Args: args}},
		},
	}
}

func mustSucceed(t *testing.T, err error) {
	t.Helper()
	require.NoError(t, err)
}

// objErr drops the object a client call returns, keeping its error.
func objErr[T any](_ T, err error) error { return err }

func waitForPod(t *testing.T, c *testCluster, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := poll.Until(context.Background(), fmt.Sprintf("%s (pod %s/%s)", what, testNamespace, name), timeout, func(ctx context.Context) (bool, string, error) {
		p, err := c.client.CoreV1().Pods(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		last = p
		return cond(p), fmt.Sprintf("status %+v", p.Status), nil
	})
	require.NoError(t, err, "%v\nevents:\n%s", err, podEvents(c, name))
	return last
}

func waitForEvent(t *testing.T, c *testCluster, pod, reason, contains string) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("event %s %q on pod %s", reason, contains, pod), func() (bool, string) {
		evs := podEvents(c, pod)
		for _, line := range strings.Split(evs, "\n") {
			if strings.HasPrefix(line, reason+": ") && strings.Contains(line, contains) {
				return true, ""
			}
		}
		return false, evs
	})
}

func podEvents(c *testCluster, pod string) string {
	evs, err := c.client.CoreV1().Events(testNamespace).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range evs.Items {
		fmt.Fprintf(&b, "%s: %s\n", e.Reason, e.Message)
	}
	return b.String()
}

func deletePodAndWait(t *testing.T, c *testCluster, name string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.client.CoreV1().Pods(testNamespace).Delete(ctx, name, metav1.DeleteOptions{}), "deleting pod %s", name)
	eventually(t, 30*time.Second, "pod "+name+" to be gone", func() (bool, string) {
		_, err := c.client.CoreV1().Pods(testNamespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	err := poll.Until(context.Background(), what, timeout, func(context.Context) (bool, string, error) {
		ok, detail := cond()
		return ok, detail, nil
	})
	require.NoError(t, err)
}

func isPodReady(p *corev1.Pod) bool { return hasCondition(p, corev1.PodReady) }

func hasCondition(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podGet(t *testing.T, pod *corev1.Pod, path string) string {
	t.Helper()
	body, code := podGetStatus(t, pod, path)
	require.Equal(t, http.StatusOK, code, "GET %s on pod %s: status %d: %s", path, pod.Name, code, body)
	return body
}

func podGetStatus(t *testing.T, pod *corev1.Pod, path string) (string, int) {
	t.Helper()
	resp, err := http.Get("http://" + net.JoinHostPort(pod.Status.PodIP, "8080") + path)
	require.NoError(t, err, "GET %s on pod %s", path, pod.Name)
	defer func() { _ = resp.Body.Close() }() // read to the end below
	body, _ := io.ReadAll(resp.Body)
	return string(body), resp.StatusCode
}

// httpGet uses a fresh connection per call: a kept-alive one would outlive the endpoints.
func httpGet(u string) (string, error) {
	client := http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(u)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }() // read to the end below
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

func containerPID(t *testing.T, pod *corev1.Pod) int {
	t.Helper()
	id := pod.Status.ContainerStatuses[0].ContainerID
	pid, err := strconv.Atoi(strings.TrimPrefix(id, "process://"))
	require.NoError(t, err, "container ID %q does not carry a pid", id)
	return pid
}

// mountsUnder lists host mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer func() { _ = f.Close() }() // read only
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir) {
			out = append(out, fields[4])
		}
	}
	return out
}

// tcpListeners lists the host's listening IPv4 TCP sockets (dialing is no proof here: a
// sandbox network may accept connections to any unknown address).
func tcpListeners(t *testing.T) []*net.TCPAddr {
	t.Helper()
	l, err := readTCPListeners()
	require.NoError(t, err)
	return l
}

func readTCPListeners() ([]*net.TCPAddr, error) {
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return nil, err
	}
	var out []*net.TCPAddr
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		fields := strings.Fields(line)
		if len(fields) < 4 || fields[3] != "0A" { // 0A: LISTEN
			continue
		}
		hexIP, hexPort, _ := strings.Cut(fields[1], ":")
		b, err := hex.DecodeString(hexIP)
		if err != nil || len(b) != 4 {
			continue
		}
		port, _ := strconv.ParseUint(hexPort, 16, 16)
		ip := net.IPv4(b[3], b[2], b[1], b[0]) // the kernel prints the address little-endian
		out = append(out, &net.TCPAddr{IP: ip, Port: int(port)})
	}
	return out, nil
}

// fleetPods maps the Deployment's pods' uids to their container pid (0 when not running).
func fleetPods(t *testing.T, c *testCluster) map[types.UID]int {
	t.Helper()
	pods, err := c.client.CoreV1().Pods(testNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app=fleet"})
	require.NoError(t, err)
	out := map[types.UID]int{}
	for _, p := range pods.Items {
		pid := 0
		if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
			pid, _ = strconv.Atoi(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "process://"))
		}
		out[p.UID] = pid
	}
	return out
}

func allRunning(pods map[types.UID]int) bool {
	for _, pid := range pods {
		if pid == 0 {
			return false
		}
	}
	return true
}

func waitForFleet(t *testing.T, c *testCluster, n int) map[types.UID]int {
	t.Helper()
	var pods map[types.UID]int
	eventually(t, 60*time.Second, fmt.Sprintf("%d running fleet pods", n), func() (bool, string) {
		pods = fleetPods(t, c)
		return len(pods) == n && allRunning(pods), fmt.Sprint(pods)
	})
	return pods
}
