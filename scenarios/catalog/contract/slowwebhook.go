package contract

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// T9 makes a target's webhook slower than its timeoutSeconds without touching the operator: a
// delaying TCP proxy (suite.DelayProxy, package delayproxy) runs as a Deployment in the target's
// namespace and the webhook Service's selector is pointed at its pods. The proxy forwards each
// connection to the serving pods at once, but delivers every byte the API server sends longer
// than the longest timeoutSeconds late — the handshake of a new connection and every request on
// one kept alive (a connection whose handshake the API server gave up on completes later and
// joins its pool) — and the answers at once. TLS passes through, so the certificate and its SAN
// are the webhook's own and the clientConfig is untouched. What the API server meets is a
// webhook that answers every call, late.

// The delaying proxy's Deployment, and the label of its pods that T9's selector requires.
const (
	delayProxyName  = "gauntlet-w16-delay-proxy"
	delayProxyLabel = "gauntlet.dev/w16-delay-proxy"
	delayProxyValue = "t9"
)

// delayMargin is how much longer than the longest timeoutSeconds the proxy delays each byte
// sent to the webhook: enough that no call's deadline falls near the moment it arrives.
const delayMargin = 2 * time.Second

// slowSymptomTimeout bounds observing T9: the proxy's endpoints reach the API server within
// moments, but every round of probes waits out timeoutSeconds for each webhook it calls.
const slowSymptomTimeout = 3 * time.Minute

// slowCall is T9's symptom, the stable part of the API server's failed-call message: `context
// deadline exceeded` (CATALOG.md §T) — or, since the proxy delays the TLS handshake too, its
// transport's own handshake timeout when that comes first: client-go gives a handshake 10s,
// which a webhook's timeoutSeconds of 10 or more leaves to it.
var slowCall = regexp.MustCompile(`context deadline exceeded|net/http: TLS handshake timeout`)

// doctorCheckServingCertificate names T9 here: the doctor does the API server's part of a
// call, a TLS handshake, and waits for it as long as the longest timeoutSeconds; the proxy
// delays the handshake longer (a webhook slow in its handler is the dry-run's to name).
const doctorCheckServingCertificate = "serving-certificate"

// slowWebhook is T9.
func slowWebhook(ctx context.Context, t *testing.T, ns string, r *symptomReport, d *doctorRuns) {
	c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
	ref := it.Namespace + "/" + it.Served.Service
	longest := longestTimeout(it.Served.Webhooks)
	delay := longest + delayMargin
	r.Fault = fmt.Sprintf("Service %s's selector pointed at a TCP proxy that delivers every byte sent to the webhook's pods %s late (the longest timeoutSeconds, %s, and %s), unchanged, and their answers at once",
		ref, delay, longest, delayMargin)
	image, why := suite.DelayProxy(ctx, t)
	if image == "" {
		r.NotApplicable = why
		expect.Skipf(t, "T9: %s", why)
	}
	expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
	services := c.Kube().CoreV1().Services(it.Namespace)
	saved, err := services.Get(ctx, it.Served.Service, metav1.GetOptions{})
	expect.NoError(t, err, "getting Service %s", ref)
	port, err := webhookPort(saved, it.Served.ServicePort)
	expect.NoError(t, err, "reading Service %s", ref)
	restore := once(func(ctx context.Context) error {
		return errors.Join(setSelector(ctx, c, saved.Namespace, saved.Name, saved.Spec.Selector), deleteDelayProxy(ctx, c, it.Namespace))
	})
	defer restoreOrFail(ctx, t, r.Fault, restore)
	expect.NoError(t, setSelector(ctx, c, saved.Namespace, saved.Name, map[string]string{delayProxyLabel: delayProxyValue}), "pointing Service %s at the delaying proxy", ref)
	// The connections the API server keeps to the Service reach the pods they were opened to,
	// whatever the selector says now: new pods end them (as T8 does for a deleted Service).
	old := restart(ctx, t, c, it, "rollout restart (the API server's open connections to the Service reach the pods behind its old selector)")
	restartSettled(ctx, t, c, it, old, "rollout restart")
	upstreams, err := servingAddresses(ctx, c, it)
	expect.NoError(t, err, "reading the addresses of the pods of Deployment %s/%s", it.Namespace, it.Served.Deployment)
	proxy := delayProxyDeployment(it.Namespace, image, delay, port, it.Served.ContainerPort, upstreams)
	_, err = c.Kube().AppsV1().Deployments(it.Namespace).Create(ctx, proxy, metav1.CreateOptions{})
	expect.NoError(t, err, "creating the delaying proxy %s/%s", it.Namespace, delayProxyName)
	expect.NoError(t, release.WaitDeploymentAvailable(ctx, c.Kube(), it.Namespace, delayProxyName, restartTimeout), "starting the delaying proxy")
	t.Logf("%s: the proxy forwards to %s", r.Fault, strings.Join(upstreams, ", "))

	judged, _ := probedWebhooks(it)
	r.Seen = expectSlowSymptom(ctx, t, c, it, ns, r.Fault, judged)
	r.Seen = mergeSeen(r.Seen, "a client that waits", expectAnswersLate(ctx, t, c, it, delay))
	d.expectNamesAs(ctx, t, r, r.Fault, doctorCheckServingCertificate, "T9", d.run(ctx, t))

	r.applyFix(ctx, t, ns, fmt.Sprintf("Service %s's selector put back as it was read before the fault, and the proxy deleted (which closes the connections it held)", ref), restore, fmt.Sprintf("putting back Service %s's selector and deleting the proxy", ref))
}

// longestTimeout is the longest timeoutSeconds of webhooks (the API server's default, 10s, for
// one that sets none).
func longestTimeout(webhooks []target.Webhook) time.Duration {
	var longest int32
	for _, w := range webhooks {
		s := w.TimeoutSeconds
		if s == 0 {
			s = 10
		}
		longest = max(longest, s)
	}
	return time.Duration(longest) * time.Second
}

// webhookPort is the port of svc the webhooks call.
func webhookPort(svc *corev1.Service, port int32) (corev1.ServicePort, error) {
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			return p, nil
		}
	}
	return corev1.ServicePort{}, fmt.Errorf("the webhook Service %s/%s has no port %d, the one its webhooks call", svc.Namespace, svc.Name, port)
}

// setSelector sets the selector of Service ns/name.
func setSelector(ctx context.Context, c *suite.Cluster, ns, name string, selector map[string]string) error {
	services := c.Kube().CoreV1().Services(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := services.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		svc.Spec.Selector = selector
		_, err = services.Update(ctx, svc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting the selector of Service %s/%s to %v: %w", ns, name, selector, err)
	}
	return nil
}

// servingAddresses are the pod IP and serving port of every Ready pod of the target's
// Deployment: where the proxy forwards.
func servingAddresses(ctx context.Context, c *suite.Cluster, it *target.Installed) ([]string, error) {
	pods, err := servingPods(ctx, c, it)
	if err != nil {
		return nil, err
	}
	addrs := podAddresses(pods, it.Served.ContainerPort)
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no Ready pod of Deployment %s/%s has an address", it.Namespace, it.Served.Deployment)
	}
	return addrs, nil
}

// servingPods are the pods of the target's Deployment.
func servingPods(ctx context.Context, c *suite.Cluster, it *target.Installed) ([]corev1.Pod, error) {
	d, err := c.Kube().AppsV1().Deployments(it.Namespace).Get(ctx, it.Served.Deployment, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := c.Kube().CoreV1().Pods(it.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// lateAnswerWait is how much longer than the proxy's delay a client that waits is given for
// the webhook's answer through it.
const lateAnswerWait = 15 * time.Second

// heldTolerance is what a timer may shave off the proxy's delay as this side measures it.
const heldTolerance = 250 * time.Millisecond

// expectAnswersLate makes sure the fault is T9's, a webhook that answers late, and not one
// that never answers (T6's dead end looks the same to the API server's timeouts): a client that
// waits out delay opens a TLS handshake through the webhook Service, as the API server does, and
// must get the certificate the webhook's own pods serve, no sooner than delay. It returns what
// that client saw.
func expectAnswersLate(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed, delay time.Duration) string {
	t.Helper()
	ref := it.Namespace + "/" + it.Served.Service
	host := it.Served.Service + "." + it.Namespace + ".svc"
	pods, err := servingPods(ctx, c, it)
	expect.NoError(t, err, "reading the pods of Deployment %s/%s", it.Namespace, it.Served.Deployment)
	var own *x509.Certificate
	for i := range pods {
		if !release.PodReady(&pods[i]) || pods[i].DeletionTimestamp != nil {
			continue
		}
		chain, err := c.PodServedCertificates(ctx, &pods[i], it.Served.ContainerPort, host)
		expect.NoError(t, err, "reading the certificate pod %s/%s serves on port %d", it.Namespace, pods[i].Name, it.Served.ContainerPort)
		own = chain[0]
		break
	}
	if own == nil {
		expect.Errorf(t, "no Ready pod of Deployment %s/%s to read the webhook's own certificate from", it.Namespace, it.Served.Deployment)
	}
	start := time.Now()
	chain, err := c.ServedCertificatesWithin(ctx, it.Namespace, it.Served.Service, it.Served.ServicePort, delay+lateAnswerWait)
	took := time.Since(start)
	var served *x509.Certificate
	if err == nil {
		served = chain[0]
	}
	seen, ok := judgeLateAnswer(delay, took, own, served, err)
	if !ok {
		expect.Errorf(t, "a TLS handshake through Service %s that waits up to %s: expected the webhook's own certificate after the proxy's delay, %s (a webhook that answers, late — T9, not one that never answers); saw %s",
			ref, delay+lateAnswerWait, delay, seen)
	}
	t.Logf("a TLS handshake through Service %s that waits: %s", ref, seen)
	return seen
}

// judgeLateAnswer judges what a client that waited saw through the proxy: the webhook's own
// certificate own, served after at least delay.
func judgeLateAnswer(delay, took time.Duration, own, served *x509.Certificate, err error) (string, bool) {
	at := took.Round(100 * time.Millisecond)
	switch {
	case err != nil:
		return fmt.Sprintf("no answer after %s: %v", at, err), false
	case own == nil || !bytes.Equal(own.Raw, served.Raw):
		return fmt.Sprintf("after %s, a certificate other than the webhook pods' own (subject %q, serial %s)", at, served.Subject, served.SerialNumber), false
	case took < delay-heldTolerance:
		return fmt.Sprintf("the webhook's own certificate after %s, sooner than the delay: the proxy did not delay the handshake", at), false
	}
	return fmt.Sprintf("the webhook's own certificate (serial %s) after %s", served.SerialNumber, at), true
}

// podAddresses are podIP:port of the Ready pods that are not being deleted, sorted.
func podAddresses(pods []corev1.Pod, port int32) []string {
	var out []string
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" || !release.PodReady(&p) {
			continue
		}
		out = append(out, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port))))
	}
	slices.Sort(out)
	return out
}

// delayProxyDeployment is the proxy in namespace ns: image forwards each connection to
// containerPort to upstreams, every byte from the client delay late. Its container port carries the name
// the Service's targetPort uses, if it names one, so that the Service resolves it.
func delayProxyDeployment(ns, image string, delay time.Duration, port corev1.ServicePort, containerPort int32, upstreams []string) *appsv1.Deployment {
	labels := map[string]string{delayProxyLabel: delayProxyValue}
	name := ""
	if port.TargetPort.StrVal != "" {
		name = port.TargetPort.StrVal
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: delayProxyName, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](1), // it closes every connection on SIGTERM
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "delay-proxy",
						Image:           image,
						ImagePullPolicy: corev1.PullNever, // the cluster was given it; a pull would only hide that it was not
						Args: []string{
							"--delay=" + delay.String(),
							fmt.Sprintf("--route=%d=%s", containerPort, strings.Join(upstreams, ",")),
						},
						Ports: []corev1.ContainerPort{{Name: name, ContainerPort: containerPort, Protocol: corev1.ProtocolTCP}},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							ReadOnlyRootFilesystem:   ptr.To(true),
						},
					}},
				},
			},
		},
	}
}

// deleteDelayProxy deletes the proxy's Deployment, if there is one, and waits until it and its
// pods are gone: a pod that is still stopping may hold a connection.
func deleteDelayProxy(ctx context.Context, c *suite.Cluster, ns string) error {
	deployments := c.Kube().AppsV1().Deployments(ns)
	err := deployments.Delete(ctx, delayProxyName, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting the delaying proxy %s/%s: %w", ns, delayProxyName, err)
	}
	return poll.Until(ctx, fmt.Sprintf("the delaying proxy %s/%s and its pods to be gone", ns, delayProxyName), restartTimeout, func(ctx context.Context) (bool, string, error) {
		pods, err := c.Kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: delayProxyLabel + "=" + delayProxyValue})
		if err != nil {
			return false, err.Error(), nil
		}
		_, err = deployments.Get(ctx, delayProxyName, metav1.GetOptions{})
		gone := apierrors.IsNotFound(err)
		return gone && len(pods.Items) == 0, fmt.Sprintf("Deployment gone: %t, %d pods", gone, len(pods.Items)), nil
	})
}

// expectSlowSymptom sends each webhook of ws its judging probe until every answer is T9's —
// Fail: refused with the API server's slowCall message; Ignore: admitted unjudged —
// for at most slowSymptomTimeout, and returns the answers by webhook, the API server's message
// verbatim. Each probe may wait out the timeoutSeconds of every webhook it passes, longer than
// one check of poll.Until: the rounds are its own.
func expectSlowSymptom(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed, ns, fault string, ws []probed) map[string]string {
	t.Helper()
	judge := func(w probed, s sent) (string, bool) {
		return judgeFailedCall(w, s, it.Served.Webhooks, slowCall)
	}
	perProbe := time.Duration(len(it.Served.Webhooks))*longestTimeout(it.Served.Webhooks) + 30*time.Second
	seen := map[string]string{}
	var short []string
	deadline := time.Now().Add(slowSymptomTimeout)
	for round := 1; ; round++ {
		short = nil
		for _, w := range ws {
			obj, err := it.Target.Object(w.judging())
			expect.NoError(t, err, "reading the probe of webhook %s", w.Name)
			probeCtx, cancel := context.WithTimeout(ctx, perProbe)
			start := time.Now()
			s, ok := judge(w, dryRun(probeCtx, c, obj, ns))
			cancel()
			seen[w.Name] = fmt.Sprintf("%s (after %s)", s, since(start))
			if !ok {
				short = append(short, w.Name)
			}
		}
		if len(short) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		t.Logf("%s: round %d of probes, not yet the symptom: %s", fault, round, shortfall(ws, short, seen, func(w probed) string { return expectedFailedCall(w, slowCall) }))
		_ = poll.Sleep(ctx, "a second between rounds of probes, until every webhook shows the symptom", time.Second) // the loop ends on an ended ctx
	}
	for _, w := range ws {
		t.Logf("%s: webhook %s (failurePolicy %s), %s: %s", fault, w.Name, w.FailurePolicy, w.judging(), seen[w.Name])
	}
	if len(short) > 0 {
		expect.Errorf(t, "%s, for %s: %s", fault, slowSymptomTimeout, shortfall(ws, short, seen, func(w probed) string { return expectedFailedCall(w, slowCall) }))
	}
	return seen
}
