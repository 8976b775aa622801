package local_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/podstats"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// workload is what the conformance feature deploys: the test server behind a Service and a
// ValidatingWebhookConfiguration that routes ConfigMap creation in its namespace to it.
type workload struct {
	ns, name, sa, hook string
	tls                *tlsMaterial
	clusterIP          string
}

func (w *workload) dnsName() string { return fmt.Sprintf("%s.%s.svc", w.name, w.ns) }

const dataMount = "/etc/gauntlet/data"

// TestConformance is the provider conformance suite: what a user of a real cluster relies on,
// checked on a local cluster, in order.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: brings up a local cluster (etcd, apiserver, node); run without -short")
	}
	w := &workload{ns: "conformance", name: "webhook", sa: "webhook", hook: "conformance.gauntlet.dev"}
	w.tls = newTLSMaterial(t, w.dnsName())

	feature := features.New("local provider conformance").
		WithLabel("provider", "local").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			deploy(ctx, t, kubeClient(t, cfg), w)
			return ctx
		}).
		Assess("Deployment pods become Running and Ready with pod-network IPs", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			kube := kubeClient(t, cfg)
			pod := waitSinglePodReady(ctx, t, kube, w, "")
			cc, err := provider.Config()
			require.NoError(t, err)
			ip, err := netip.ParseAddr(pod.Status.PodIP)
			require.NoError(t, err, "pod %s has IP %q, want one in the pod range %s", pod.Name, pod.Status.PodIP, cc.PodCIDR)
			require.True(t, netip.MustParsePrefix(cc.PodCIDR).Contains(ip), "pod %s has IP %q, want one in the pod range %s", pod.Name, pod.Status.PodIP, cc.PodCIDR)
			require.Equal(t, corev1.PodRunning, pod.Status.Phase, "pod %s phase %s, want Running", pod.Name, pod.Status.Phase)
			return ctx
		}).
		Assess("the apiserver reaches the Service with TLS ServerName <svc>.<ns>.svc", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			kube := kubeClient(t, cfg)
			pod := waitSinglePodReady(ctx, t, kube, w, "")
			err := createConfigMap(ctx, kube, w.ns, "denied", true)
			want := fmt.Sprintf(`admission webhook %q denied the request: denied by pod %s (tls server name %s)`, w.hook, pod.Name, w.dnsName())
			require.ErrorContains(t, err, want, "creating a ConfigMap the webhook denies: got %v, want an error containing %q", err, want)
			require.NoError(t, createConfigMap(ctx, kube, w.ns, "admitted", false), "creating a ConfigMap the webhook allows")
			return ctx
		}).
		Assess("kubectl logs returns the process output", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			pod := waitSinglePodReady(ctx, t, kubeClient(t, cfg), w, "")
			out, err := kubectl(t, "logs", "-n", w.ns, pod.Name)
			require.NoError(t, err, "kubectl logs %s/%s: %v\n%s", w.ns, pod.Name, err, out)
			for _, want := range []string{"gauntlet-testserver starting pod=" + pod.Name, "request POST /validate"} {
				assert.Contains(t, out, want, "kubectl logs output lacks %q:\n%s", want, out)
			}
			return ctx
		}).
		Assess("the node's stats summary has the pod's container memory, read without the API server's node proxy", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// The node proxy answers "400 address not allowed" for this node (InternalIP
			// 127.0.0.1): NodeStats, what suite.Cluster.PodMemory asks, must go around it.
			pod := waitSinglePodReady(ctx, t, kubeClient(t, cfg), w, "")
			summary, err := provider.NodeStats(ctx, pod.Spec.NodeName)
			require.NoError(t, err, "NodeStats of node %s", pod.Spec.NodeName)
			mem, err := podstats.ContainerMemory(summary, pod)
			require.NoError(t, err)
			// A Go HTTPS server has its runtime and heap resident: a few MiB at the least.
			require.GreaterOrEqual(t, mem["server"], uint64(1<<20), "working set of container server of pod %s/%s = %d bytes, want ≥ 1 MiB (all containers: %v)", pod.Namespace, pod.Name, mem["server"], mem)

			other, err := provider.NodeStats(ctx, "no-such-node")
			require.ErrorContains(t, err, "node no-such-node is not in local cluster "+clusterName, "NodeStats of a node the cluster does not have answered %+v", other)
			return ctx
		}).
		Assess("a Secret update reaches the mounted files atomically", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			assertAtomicSecretUpdate(ctx, t, kubeClient(t, cfg), w)
			return ctx
		}).
		Assess("a ServiceAccount without permission gets forbidden, with permission succeeds", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			kube := kubeClient(t, cfg)
			var got struct {
				Error string `json:"error"`
				Items *int   `json:"items"`
			}
			require.NoError(t, serviceGet(w.clusterIP, 443, w.dnsName(), w.tls.pool, "/api?resource=secrets", &got))
			want := fmt.Sprintf(`secrets is forbidden: User "system:serviceaccount:%s:%s" cannot list resource "secrets" in API group "" in the namespace "%s"`, w.ns, w.sa, w.ns)
			require.Equal(t, want, got.Error, "listing Secrets as the pod's ServiceAccount: got %q, want %q", got.Error, want)
			grantSecretList(ctx, t, kube, w)
			err := poll.Until(ctx, "the pod to list Secrets after granting a Role", 15*time.Second, func(ctx context.Context) (bool, string, error) {
				got.Error, got.Items = "", nil
				if err := serviceGet(w.clusterIP, 443, w.dnsName(), w.tls.pool, "/api?resource=secrets", &got); err != nil {
					return false, err.Error(), nil
				}
				return got.Error == "" && got.Items != nil, fmt.Sprintf("error %q", got.Error), nil
			})
			require.NoError(t, err)
			return ctx
		}).
		Assess("kubectl rollout restart replaces the process", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			kube := kubeClient(t, cfg)
			old := waitSinglePodReady(ctx, t, kube, w, "")
			var before whoami
			require.NoError(t, serviceGet(w.clusterIP, 443, w.dnsName(), w.tls.pool, "/whoami", &before))
			out, err := kubectl(t, "rollout", "restart", "-n", w.ns, "deployment/"+w.name)
			require.NoError(t, err, "kubectl rollout restart: %v\n%s", err, out)
			out, err = kubectl(t, "rollout", "status", "-n", w.ns, "deployment/"+w.name, "--timeout=90s")
			require.NoError(t, err, "kubectl rollout status: %v\n%s", err, out)
			fresh := waitSinglePodReady(ctx, t, kube, w, old.Name)
			var after whoami
			err = poll.Until(ctx, "the Service to answer from the new pod "+fresh.Name, 20*time.Second, func(context.Context) (bool, string, error) {
				if err := serviceGet(w.clusterIP, 443, w.dnsName(), w.tls.pool, "/whoami", &after); err != nil {
					return false, err.Error(), nil
				}
				return after.Pod == fresh.Name, fmt.Sprintf("answered from %q (pid %d)", after.Pod, after.PID), nil
			})
			require.NoError(t, err)
			procs := testServerProcesses(old.Name)
			require.Empty(t, procs, "old pod %s still has processes after the rollout: %v", old.Name, procs)
			require.Len(t, testServerProcesses(fresh.Name), 1, "new pod %s: want exactly one test server process, got %v", fresh.Name, testServerProcesses(fresh.Name))
			return ctx
		}).
		Assess("scaled to 0, a webhook call fails with connect: connection refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			kube := kubeClient(t, cfg)
			out, err := kubectl(t, "scale", "-n", w.ns, "deployment/"+w.name, "--replicas=0")
			require.NoError(t, err, "kubectl scale: %v\n%s", err, out)
			want := fmt.Sprintf(`failed calling webhook %q: failed to call webhook: Post "https://%s:443/validate?timeout=5s": dial tcp %s:443: connect: connection refused`,
				w.hook, w.dnsName(), w.clusterIP)
			// While the pod terminates, a call may still be denied by it, or end in EOF (the
			// process closed its listener before the EndpointSlice dropped it, as in any
			// cluster). Once the node closed the Service's listener every call fails like this.
			err = poll.Until(ctx, "a webhook call to fail with connection refused after scaling to 0", 60*time.Second, func(ctx context.Context) (bool, string, error) {
				err := createConfigMap(ctx, kube, w.ns, "after-scale-down", true)
				if err == nil {
					return false, "the call was admitted", nil
				}
				return strings.Contains(err.Error(), want), err.Error(), nil
			})
			require.NoError(t, err, "%v\nwant the error to contain %q", err, want)
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			kube := kubeClient(t, cfg)
			_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, w.hook, metav1.DeleteOptions{})
			_ = kube.CoreV1().Namespaces().Delete(ctx, w.ns, metav1.DeleteOptions{})
			return ctx
		}).
		Feature()
	testenv.Test(t, feature)
}

type whoami struct {
	Pod        string `json:"pod"`
	PID        int    `json:"pid"`
	ServerName string `json:"serverName"`
}

func deploy(ctx context.Context, t *testing.T, kube kubernetes.Interface, w *workload) {
	t.Helper()
	labels := map[string]string{"app": w.name}
	must := func(what string, err error) {
		t.Helper()
		require.NoError(t, err, "creating %s", what)
	}
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}, metav1.CreateOptions{})
	must("Namespace "+w.ns, err)
	_, err = kube.CoreV1().ServiceAccounts(w.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: w.sa}}, metav1.CreateOptions{})
	must("ServiceAccount "+w.ns+"/"+w.sa, err)
	_, err = kube.CoreV1().Secrets(w.ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": w.tls.certPEM, "tls.key": w.tls.keyPEM},
	}, metav1.CreateOptions{})
	must("Secret "+w.ns+"/webhook-tls", err)
	_, err = kube.CoreV1().Secrets(w.ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		StringData: map[string]string{"first": "v1", "second": "v1"},
	}, metav1.CreateOptions{})
	must("Secret "+w.ns+"/data", err)
	https := &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS}
	_, err = kube.AppsV1().Deployments(w.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName:            w.sa,
					TerminationGracePeriodSeconds: ptr.To[int64](5),
					Containers: []corev1.Container{{
						Name:  "server",
						Image: TestImage + ":test",
						Args:  []string{"--port=8443", "--cert-dir=/etc/gauntlet/tls"},
						Env: []corev1.EnvVar{
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
						},
						Ports: []corev1.ContainerPort{{Name: "https", ContainerPort: 8443}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "tls", MountPath: "/etc/gauntlet/tls", ReadOnly: true},
							{Name: "data", MountPath: dataMount, ReadOnly: true},
						},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: https}, PeriodSeconds: 1},
						LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: https}, PeriodSeconds: 5},
					}},
					Volumes: []corev1.Volume{
						{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "webhook-tls"}}}, //nolint:gosec // G101: the name of a Kubernetes Secret, not a credential
						{Name: "data", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "data"}}},
					},
				},
			},
		},
	}, metav1.CreateOptions{})
	must("Deployment "+w.ns+"/"+w.name, err)
	svc, err := kube.CoreV1().Services(w.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: w.name},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{
			{Name: "https", Port: 443, TargetPort: intstr.FromString("https")},
		}},
	}, metav1.CreateOptions{})
	must("Service "+w.ns+"/"+w.name, err)
	w.clusterIP = svc.Spec.ClusterIP
	_, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: w.hook},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: w.hook,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service:  &admissionregistrationv1.ServiceReference{Namespace: w.ns, Name: w.name, Path: ptr.To("/validate"), Port: ptr.To[int32](443)},
				CABundle: w.tls.caPEM,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": w.ns}},
			ObjectSelector:          &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gauntlet.dev/webhook-test", Operator: metav1.LabelSelectorOpExists}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}, metav1.CreateOptions{})
	must("ValidatingWebhookConfiguration "+w.hook, err)
}

// createConfigMap creates a ConfigMap the test webhook sees; deny asks it to refuse.
func createConfigMap(ctx context.Context, kube kubernetes.Interface, ns, name string, deny bool) error {
	labels := map[string]string{"gauntlet.dev/webhook-test": "true"}
	if deny {
		labels["gauntlet.dev/deny"] = "true"
	}
	_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Labels: labels},
	}, metav1.CreateOptions{})
	return err
}

// waitSinglePodReady waits until the Deployment has exactly one pod, Ready, other than notName.
func waitSinglePodReady(ctx context.Context, t *testing.T, kube kubernetes.Interface, w *workload, notName string) *corev1.Pod {
	t.Helper()
	var ready *corev1.Pod
	what := fmt.Sprintf("one Ready pod of Deployment %s/%s", w.ns, w.name)
	err := poll.Until(ctx, what, 90*time.Second, func(ctx context.Context) (bool, string, error) {
		pods, err := kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + w.name})
		if err != nil {
			return false, err.Error(), nil
		}
		var descr []string
		ready = nil
		for i := range pods.Items {
			p := &pods.Items[i]
			descr = append(descr, describePod(p))
			if p.Name != notName && p.DeletionTimestamp == nil && podReady(p) {
				ready = p
			}
		}
		return ready != nil && len(pods.Items) == 1, "pods: " + strings.Join(descr, "; "), nil
	})
	require.NoError(t, err)
	return ready
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func describePod(p *corev1.Pod) string {
	s := fmt.Sprintf("%s phase=%s node=%q ready=%v", p.Name, p.Status.Phase, p.Spec.NodeName, podReady(p))
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil {
			s += fmt.Sprintf(" waiting=%s(%s)", cs.State.Waiting.Reason, cs.State.Waiting.Message)
		}
		if cs.State.Terminated != nil {
			s += fmt.Sprintf(" terminated=%s(exit %d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
		s += fmt.Sprintf(" restarts=%d", cs.RestartCount)
	}
	return s
}

type volumeSnapshot struct {
	Data  string            `json:"data"`
	Files map[string]string `json:"files"`
	Links map[string]string `json:"links"`
}

// assertAtomicSecretUpdate watches the mounted Secret from inside the pod while both keys
// change: every view must show both old or both new values, never a mix, and the files must
// be links through ..data as kubelet lays them out.
func assertAtomicSecretUpdate(ctx context.Context, t *testing.T, kube kubernetes.Interface, w *workload) {
	var before volumeSnapshot
	require.NoError(t, serviceGet(w.clusterIP, 443, w.dnsName(), w.tls.pool, "/snapshot?dir="+dataMount, &before))
	require.Equal(t, "v1", before.Files["first"], "mounted Secret before the update: %+v", before)
	require.Equal(t, "v1", before.Files["second"], "mounted Secret before the update: %+v", before)
	for _, key := range []string{"first", "second"} {
		require.Equal(t, filepath.Join("..data", key), before.Links[key], "%s/%s links to %q, want ..data/%s (kubelet's layout)", dataMount, key, before.Links[key], key)
	}

	var (
		mu     sync.Mutex
		views  []volumeSnapshot
		stop   = make(chan struct{})
		done   = make(chan struct{})
		errors []string
	)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var s volumeSnapshot
			err := serviceGet(w.clusterIP, 443, w.dnsName(), w.tls.pool, "/snapshot?dir="+dataMount, &s)
			mu.Lock()
			if err != nil {
				errors = append(errors, err.Error())
			} else {
				views = append(views, s)
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	secret, err := kube.CoreV1().Secrets(w.ns).Get(ctx, "data", metav1.GetOptions{})
	require.NoError(t, err)
	secret.Data = map[string][]byte{"first": []byte("v2"), "second": []byte("v2")}
	_, err = kube.CoreV1().Secrets(w.ns).Update(ctx, secret, metav1.UpdateOptions{})
	require.NoError(t, err, "updating Secret %s/data", w.ns)
	err = poll.Until(ctx, "the Secret update to reach "+dataMount, 90*time.Second, func(context.Context) (bool, string, error) {
		mu.Lock()
		defer mu.Unlock()
		updated := len(views) > 0 && views[len(views)-1].Files["first"] == "v2"
		return updated, fmt.Sprintf("last views: %v, errors: %v", lastN(views, 3), lastN(errors, 3)), nil
	})
	close(stop)
	<-done
	require.NoError(t, err)
	for _, v := range views {
		require.Equal(t, v.Files["second"], v.Files["first"], "non-atomic view of the Secret volume: %+v", v)
	}
	last := views[len(views)-1]
	require.NotEqual(t, before.Data, last.Data, "..data still points at %q after the update; kubelet swaps it to a new directory", last.Data)
	t.Logf("%d consistent views of %s while the Secret changed", len(views), dataMount)
}

func lastN[T any](s []T, n int) []T {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func grantSecretList(ctx context.Context, t *testing.T, kube kubernetes.Interface, w *workload) {
	t.Helper()
	_, err := kube.RbacV1().Roles(w.ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "list-secrets"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		require.True(t, apierrors.IsAlreadyExists(err), "creating Role %s/list-secrets: %v", w.ns, err)
	}
	_, err = kube.RbacV1().RoleBindings(w.ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "list-secrets"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "list-secrets"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: w.sa, Namespace: w.ns}},
	}, metav1.CreateOptions{})
	if err != nil {
		require.True(t, apierrors.IsAlreadyExists(err), "creating RoleBinding %s/list-secrets: %v", w.ns, err)
	}
}

// testServerProcesses lists host pids of test server processes started for pod podName
// (identified by the POD_NAME the node put in their environment).
func testServerProcesses(podName string) []string {
	want := []byte("POD_NAME=" + podName + "\x00")
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != filepath.Base(testServer) {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(environ, want) {
			out = append(out, e.Name())
		}
	}
	return out
}
