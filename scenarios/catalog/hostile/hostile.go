// Package hostile holds the hostile-input scenarios (CATALOG.md §H) as e2e-framework features,
// labelled scenario=<ID>. Each one sends, from outside the cluster as anyone who can reach the
// operator's ports would, requests the API server never sends to every path the operator
// serves — every admission path its webhook configurations name, the conversion path the
// DynamoGraphDeploymentRequest CRD names, and the probe paths of its pod — both directly to the
// operator's pod (Cluster.DialPod) and through the webhook Service (Cluster.DialService), and
// asserts what a client sees: a bounded answer with a status and a message that says what was
// wrong. Nothing here dials a cluster address itself: the provider opens every connection
// (from this machine only where ServiceNetworkFromHost says it may, through a node or the API
// server otherwise), so the same code runs on local and kind.
//
// Every scenario also holds the operator to what must survive the input (operatorHeld): the
// pod was never replaced or restarted (same UID, same restartCount), its resident memory —
// process_resident_memory_bytes, read over the operator's authenticated HTTPS metrics endpoint
// through the same provider connection — stayed under a bound while the input was sent, and
// admission works afterwards: a valid DynamoGraphDeployment is admitted, an invalid one denied
// by the validating webhook, and a DynamoGraphDeploymentRequest converts.
package hostile

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// Features are the hostile-input scenarios H1–H8.
func Features() []types.Feature {
	return []types.Feature{
		malformedBodies(),
		wrongReviews(),
		wrongMethodsAndTypes(),
		hugeBodies(),
		slowClients(),
		tlsPolicy(),
		probePaths(),
		// Last: it stops the pod the others send their input to.
		requestAcrossStop(),
	}
}

// What the operator promises a client that sends what it should not. The bounds are the
// server's own plus room for a shared 2-core machine and kind's docker-exec hop.
const (
	// maxRequestBytes is the operator's request body limit on every webhook path (7 MiB,
	// controller-runtime's admission limit; /convert since the fix of issue 15 finding 1).
	maxRequestBytes = 7 << 20
	// answerBound bounds the answer to a request the server refuses: a malformed or
	// oversized body, a wrong method or type. A 100 MB body is refused after at most 7 MiB.
	answerBound = 3 * time.Second
	// headerTimeout is how long the webhook server waits for a request's headers (and a TLS
	// handshake): controller-runtime's ReadHeaderTimeout, 32 s.
	headerTimeout = 32 * time.Second
	// probeReadTimeout is how long the probe server waits for a whole request (the
	// operator's, 10 s).
	probeReadTimeout = 10 * time.Second
	// bodyTimeout is how long the servers wait for a request's body once its headers are in
	// (the operator's webhook.DefaultBodyReadTimeout).
	bodyTimeout = 10 * time.Second
	// cutOffSlack is how much later than its timeout a slow client may be cut off.
	cutOffSlack = 8 * time.Second
	// rssHeadroom is how far the operator's resident memory may rise over its level before
	// the input while the input is sent. Four concurrent bodies each read up to the 7 MiB
	// limit stay far below it; four 100 MB bodies read whole take about 800 MB (issue 15).
	rssHeadroom = 150 << 20
	// hugeBody is the size of a huge body: streamed, never held in memory here.
	hugeBody = 100 << 20
)

// env is what every scenario sends its input to: the suite's release, its operator pod, the
// paths the server serves and the ways to reach them.
type env struct {
	c   *suite.Cluster
	r   *chart.Release
	pod corev1.Pod
	// webhookPaths are the admission paths of the release's webhook configurations, then the
	// conversion path of the CRD's conversion webhook.
	webhookPaths []webhookPath
	// routes reach the webhook server: directly to the pod, and through the Service.
	routes []route
	// tls is what the API server checks: the caBundle of the webhook configuration and the
	// Service's DNS name.
	tls *tls.Config
	// healthPort is the pod's probe port, probePaths the paths its probes GET there.
	healthPort int32
	probePaths []string
}

// webhookPath is one path of the webhook server and who calls it.
type webhookPath struct {
	path      string
	admission bool     // false: the conversion path
	callers   []string // the webhooks (or the CRD) that name it
}

func (p webhookPath) String() string { return p.path }

// route is one way to open a connection to the webhook server.
type route struct {
	name string // "directly (pod ns/name:9443)", "through Service ns/name:443"
	dial func(ctx context.Context) (net.Conn, error)
}

// discover reads what the release serves and how to reach it, as a user with kubectl would:
// the webhook configurations, the CRD's conversion webhook, the operator pod and its ports.
func discover(ctx context.Context, t *testing.T) *env {
	t.Helper()
	c, r := suite.ClusterFrom(ctx, t), suite.ReleaseFrom(ctx, t)
	e := &env{c: c, r: r}
	kube := c.Kube()

	var caBundle []byte
	byPath := map[string]*webhookPath{}
	add := func(path, caller string, admission bool) {
		if byPath[path] == nil {
			byPath[path] = &webhookPath{path: path, admission: admission}
		}
		byPath[path].callers = append(byPath[path].callers, caller)
	}
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, r.ValidatingName(), metav1.GetOptions{})
	expect.NoError(t, err, "reading ValidatingWebhookConfiguration %s", r.ValidatingName())
	for _, w := range vwc.Webhooks {
		if s := w.ClientConfig.Service; s != nil && s.Path != nil {
			add(*s.Path, "validating webhook "+w.Name, true)
			caBundle = w.ClientConfig.CABundle
		}
	}
	mwc, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, r.MutatingName(), metav1.GetOptions{})
	expect.NoError(t, err, "reading MutatingWebhookConfiguration %s", r.MutatingName())
	for _, w := range mwc.Webhooks {
		if s := w.ClientConfig.Service; s != nil && s.Path != nil {
			add(*s.Path, "mutating webhook "+w.Name, true)
		}
	}
	var admissionPaths []string
	for p := range byPath {
		admissionPaths = append(admissionPaths, p)
	}
	slices.Sort(admissionPaths)
	if len(admissionPaths) == 0 {
		expect.Fatalf(t, "expected the webhook configurations %s and %s to name the operator's admission paths; saw none", r.ValidatingName(), r.MutatingName())
	}
	crd, err := c.CRDs().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, chart.ConversionCRD, metav1.GetOptions{})
	expect.NoError(t, err, "reading CustomResourceDefinition %s", chart.ConversionCRD)
	conv := crd.Spec.Conversion
	if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil || conv.Webhook.ClientConfig.Service.Path == nil {
		expect.Fatalf(t, "expected CustomResourceDefinition %s to name a conversion webhook path; saw %+v", chart.ConversionCRD, conv)
	}
	for _, p := range admissionPaths {
		e.webhookPaths = append(e.webhookPaths, *byPath[p])
	}
	e.webhookPaths = append(e.webhookPaths, webhookPath{path: *conv.Webhook.ClientConfig.Service.Path, callers: []string{"conversion webhook of " + chart.ConversionCRD}})

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		expect.Fatalf(t, "expected a PEM caBundle in ValidatingWebhookConfiguration %s; saw %d bytes", r.ValidatingName(), len(caBundle))
	}
	e.tls = &tls.Config{RootCAs: roots, ServerName: r.ServiceHost(), MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}

	e.pod = readyOperatorPod(ctx, t, e)
	webhookPort := containerPort(t, &e.pod, "webhook-server")
	e.healthPort = containerPort(t, &e.pod, "health")
	for _, ct := range e.pod.Spec.Containers {
		for _, p := range []*corev1.Probe{ct.LivenessProbe, ct.ReadinessProbe, ct.StartupProbe} {
			if p != nil && p.HTTPGet != nil && !slices.Contains(e.probePaths, p.HTTPGet.Path) {
				e.probePaths = append(e.probePaths, p.HTTPGet.Path)
			}
		}
	}
	pod := e.pod
	e.routes = []route{
		{name: fmt.Sprintf("directly (pod %s/%s:%d)", pod.Namespace, pod.Name, webhookPort),
			dial: func(ctx context.Context) (net.Conn, error) { return c.DialPod(ctx, &pod, webhookPort) }},
		{name: fmt.Sprintf("through Service %s/%s:443", r.WebhookNamespace(), r.ServiceName()),
			dial: func(ctx context.Context) (net.Conn, error) {
				return c.DialService(ctx, r.WebhookNamespace(), r.ServiceName(), 443)
			}},
	}
	return e
}

// readyOperatorPod is the release's one Ready operator pod (the chart's default is one
// replica; with more, the first Ready one — the Service may route to any of them).
func readyOperatorPod(ctx context.Context, t *testing.T, e *env) corev1.Pod {
	t.Helper()
	pods, err := release.OperatorPods(ctx, e.c.Kube(), e.r)
	expect.NoError(t, err, "listing the operator's pods")
	var seen []string
	for _, p := range pods {
		if p.DeletionTimestamp == nil && release.PodReady(&p) {
			return p
		}
		seen = append(seen, release.PodState(&p))
	}
	expect.Fatalf(t, "expected a Ready operator pod of %s; saw %s", e.r, strings.Join(seen, "; "))
	return corev1.Pod{}
}

func containerPort(t *testing.T, p *corev1.Pod, name string) int32 {
	t.Helper()
	port, ok := release.ContainerPort(p, name)
	if !ok {
		expect.Fatalf(t, "expected pod %s/%s to have a container port named %q", p.Namespace, p.Name, name)
	}
	return port
}

// dialTLS opens a connection by r and completes a TLS handshake as the API server does (the
// caBundle, the Service's name, HTTP/1.1).
func (e *env) dialTLS(ctx context.Context, r route) (*tls.Conn, error) {
	raw, err := r.dial(ctx)
	if err != nil {
		return nil, err
	}
	conn := tls.Client(raw, e.tls.Clone())
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := conn.HandshakeContext(hctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("TLS handshake %s: %w", r.name, err)
	}
	return conn, nil
}

// dialHealth opens a plain connection to the pod's probe port (the kubelet's way: HTTP).
func (e *env) dialHealth(ctx context.Context) (net.Conn, error) {
	return e.c.DialPod(ctx, &e.pod, e.healthPort)
}

// healthRoute names the probe port in messages.
func (e *env) healthRoute() string {
	return fmt.Sprintf("directly (pod %s/%s:%d, the probe port)", e.pod.Namespace, e.pod.Name, e.healthPort)
}
