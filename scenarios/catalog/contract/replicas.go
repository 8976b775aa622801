package contract

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// minReplicas is how many replicas W14 runs at least: a leader and a follower.
const minReplicas = 2

// scaleTimeout bounds a scale of the target's Deployment: pods start, or go.
const scaleTimeout = 3 * time.Minute

// reviewTimeout bounds one review sent to a pod: the API server's default webhook timeout.
const reviewTimeout = 10 * time.Second

// everyReplicaServes is W14: with more than one replica (the chart's count, or 2 when the chart
// runs one), every Ready replica judges every webhook's probe when the review is sent to it
// directly, as the API server would send it through the Service to whichever endpoint it picks
// — a follower that waits for leadership before it serves fails admissions at random. And each
// Lease the replicas hold has one holder that keeps renewing it: one writer.
func everyReplicaServes() e2etypes.Feature {
	var ns string
	var scaled bool
	return features.New("with several replicas, every replica answers every webhook and one holds each Lease").
		WithLabel(suite.LabelScenario, "W14").
		Setup(suite.NamespaceSetup(&ns, "w14")).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			if it.Served.Replicas >= minReplicas {
				return ctx
			}
			scaled = true
			expect.NoError(t, release.ScaleDeployment(ctx, c.Kube(), it.Namespace, it.Served.Deployment, minReplicas, scaleTimeout),
				"scaling the target's Deployment from the chart's %d replicas to %d", it.Served.Replicas, minReplicas)
			return ctx
		}).
		Assess("every Ready replica judges every webhook's probe sent to it directly", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			pods := readyPods(ctx, t, c, it, minReplicas)
			suite.Note(ctx, t, "replicas", len(pods))
			var wrong []string
			judged, _ := probedWebhooks(it) // W1 names the webhooks no probe shows judging
			for _, w := range judged {
				roots := webhookRoots(ctx, t, c, w.Webhook)
				for i := range pods {
					if seen := judgeDirect(ctx, c, it, &pods[i], w, ns, roots); seen != "" {
						wrong = append(wrong, fmt.Sprintf("pod %s, webhook %s: %s", pods[i].Name, w.Name, seen))
					}
				}
			}
			if len(wrong) > 0 {
				expect.Errorf(t, "expected every replica to judge every probe sent to it directly; saw:\n  %s", strings.Join(wrong, "\n  "))
			}
			return ctx
		}).
		Assess("each Lease the replicas hold has one holder, who keeps renewing it", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			pods := readyPods(ctx, t, c, it, minReplicas)
			held := leasesHeldBy(ctx, t, c, it.Namespace, pods)
			if len(held) == 0 {
				suite.Note(ctx, t, "leases", "none: no Lease in the release namespace is held by a replica, so the target elects no leader there")
				return ctx
			}
			var seen []string
			for name, l := range held {
				seen = append(seen, fmt.Sprintf("%s: %s", name, l))
			}
			slices.Sort(seen)
			suite.Note(ctx, t, "leases", seen)
			for name, first := range held {
				expect.Eventually(ctx, t, fmt.Sprintf("Lease %s/%s, held by %s, to be renewed by the same holder", it.Namespace, name, first.holder), leaseWatch(first),
					func(ctx context.Context) (bool, string, error) {
						now, err := readLease(ctx, c, it.Namespace, name)
						if err != nil {
							return false, err.Error(), nil
						}
						if now.holder != first.holder {
							return false, "", fmt.Errorf("expected one writer: Lease %s/%s changed holder from %s to %s while every replica ran", it.Namespace, name, first.holder, now.holder)
						}
						return now.renewed.After(first.renewed), fmt.Sprintf("renewed at %s, first seen renewed at %s", now.renewed, first.renewed), nil
					})
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			if scaled {
				expect.NoError(t, release.ScaleDeployment(ctx, c.Kube(), it.Namespace, it.Served.Deployment, it.Served.Replicas, scaleTimeout),
					"scaling the target's Deployment back to the chart's %d replicas", it.Served.Replicas)
			}
			return ctx
		}).Feature()
}

// readyPods are the Ready pods behind the webhook Service, at least atLeast of them.
func readyPods(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed, atLeast int) []corev1.Pod {
	t.Helper()
	pods, err := release.DeploymentPods(ctx, c.Kube(), it.Namespace, it.Served.Deployment)
	expect.NoError(t, err, "listing the pods behind Service %s/%s", it.Namespace, it.Served.Service)
	var ready []corev1.Pod
	var states []string
	for _, p := range pods {
		states = append(states, release.PodState(&p))
		if p.DeletionTimestamp == nil && release.PodReady(&p) {
			ready = append(ready, p)
		}
	}
	if len(ready) < atLeast {
		expect.Fatalf(t, "expected at least %d Ready pods of Deployment %s/%s; saw %s", atLeast, it.Namespace, it.Served.Deployment, strings.Join(states, "; "))
	}
	return ready
}

// webhookRoots is the caBundle of webhook w as a pool: what the API server trusts.
func webhookRoots(ctx context.Context, t *testing.T, c *suite.Cluster, w target.Webhook) *x509.CertPool {
	t.Helper()
	var bundle []byte
	if w.Mutating {
		cfg, err := c.Kube().AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, w.Configuration, metav1.GetOptions{})
		expect.NoError(t, err, "getting MutatingWebhookConfiguration %s", w.Configuration)
		for _, h := range cfg.Webhooks {
			if h.Name == w.Name {
				bundle = h.ClientConfig.CABundle
			}
		}
	} else {
		cfg, err := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, w.Configuration, metav1.GetOptions{})
		expect.NoError(t, err, "getting ValidatingWebhookConfiguration %s", w.Configuration)
		for _, h := range cfg.Webhooks {
			if h.Name == w.Name {
				bundle = h.ClientConfig.CABundle
			}
		}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		expect.Fatalf(t, "expected a PEM caBundle for webhook %s in configuration %s; saw %d bytes", w.Name, w.Configuration, len(bundle))
	}
	return roots
}

// expectEveryPodJudges waits until deadline for each of pods to judge every judged webhook's
// probe sent to it directly (judgeDirect); when names the moment ("after the hostile input").
func expectEveryPodJudges(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed, pods []corev1.Pod, ns string, deadline time.Time, when string) {
	t.Helper()
	judged, _ := probedWebhooks(it)
	for _, w := range judged {
		roots := webhookRoots(ctx, t, c, w.Webhook)
		for i := range pods {
			expect.Eventually(ctx, t, fmt.Sprintf("pod %s to judge webhook %s's probe sent to it directly%s", pods[i].Name, w.Name, when), until(deadline),
				func(ctx context.Context) (bool, string, error) {
					seen := judgeDirect(ctx, c, it, &pods[i], w, ns, roots)
					return seen == "", seen, nil
				})
		}
	}
}

// judgeDirect sends webhook w's judging probe to pod as the API server would (an
// AdmissionReview over TLS trusting roots, for the Service's name) and says how the answer
// fails to judge it, or "" (judgeAnswer).
func judgeDirect(ctx context.Context, c *suite.Cluster, it *target.Installed, pod *corev1.Pod, w probed, ns string, roots *x509.CertPool) string {
	obj, err := it.Target.Object(w.judging())
	if err != nil {
		return err.Error()
	}
	review, err := reviewOf(c, obj, ns)
	if err != nil {
		return err.Error()
	}
	resp, err := postReview(ctx, c, pod, it.Served.ContainerPort, w.Path, it.Served.ServiceHost(), roots, review)
	if err != nil {
		return err.Error()
	}
	return judgeAnswer(w, obj, review, resp)
}

// judgeAnswer says how resp, webhook w's answer to review of obj (its judging probe), fails to
// judge it, or "": it must carry the request's uid, and a validating webhook must deny with the
// declared message, a mutating one patch as declared.
func judgeAnswer(w probed, obj *unstructured.Unstructured, review *admissionv1.AdmissionReview, resp *admissionv1.AdmissionResponse) string {
	p := w.Probe
	if resp.UID != review.Request.UID {
		return fmt.Sprintf("the answer's uid is %q, not the request's %q", resp.UID, review.Request.UID)
	}
	if !w.Mutating {
		switch {
		case resp.Allowed:
			return fmt.Sprintf("expected %s denied with %q, saw it allowed", p.Denied.Object, p.Denied.Message)
		case resp.Result == nil || !strings.Contains(resp.Result.Message, p.Denied.Message):
			return fmt.Sprintf("expected %s denied with %q, saw denied with %+v", p.Denied.Object, p.Denied.Message, resp.Result)
		}
		return ""
	}
	if !resp.Allowed {
		return fmt.Sprintf("expected %s allowed with a patch, saw it denied: %+v", p.Admitted, resp.Result)
	}
	return judgeDirectPatch(p, obj, resp)
}

// judgeDirectPatch applies the answer's JSON patch to obj and says how the result fails to show
// probe p's patch, or "".
func judgeDirectPatch(p target.Probe, obj *unstructured.Unstructured, resp *admissionv1.AdmissionResponse) string {
	ops, err := p.ExpectedPatch()
	if err != nil {
		return err.Error()
	}
	raw, err := obj.MarshalJSON()
	if err != nil {
		return err.Error()
	}
	if len(resp.Patch) > 0 {
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			return fmt.Sprintf("the answer's patch is no JSON patch: %v: %s", err, resp.Patch)
		}
		if raw, err = patch.Apply(raw); err != nil {
			return fmt.Sprintf("the answer's patch %s does not apply to %s: %v", resp.Patch, p.Admitted, err)
		}
	}
	got := &unstructured.Unstructured{}
	if err := got.UnmarshalJSON(raw); err != nil {
		return err.Error()
	}
	if err := target.PatchSeen(ops, got); err != nil {
		return fmt.Sprintf("the answer's patch %q does not make %s: %v", resp.Patch, p.Patch, err)
	}
	return ""
}

// reviewOf is the AdmissionReview the API server would send for a create of obj in ns.
func reviewOf(c *suite.Cluster, obj *unstructured.Unstructured, ns string) (*admissionv1.AdmissionReview, error) {
	m, err := c.RESTMappingOf(obj)
	if err != nil {
		return nil, err
	}
	obj = obj.DeepCopy()
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		ns = ""
	}
	obj.SetNamespace(ns)
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	gvk := metav1.GroupVersionKind{Group: m.GroupVersionKind.Group, Version: m.GroupVersionKind.Version, Kind: m.GroupVersionKind.Kind}
	gvr := metav1.GroupVersionResource{Group: m.Resource.Group, Version: m.Resource.Version, Resource: m.Resource.Resource}
	dry := true
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:  types.UID(fmt.Sprintf("gauntlet-direct-%d", time.Now().UnixNano())),
			Kind: gvk, Resource: gvr, RequestKind: &gvk, RequestResource: &gvr,
			Name: obj.GetName(), Namespace: ns, Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: "gauntlet-direct", Groups: []string{"system:authenticated"}}, Object: runtime.RawExtension{Raw: raw}, DryRun: &dry,
		},
	}, nil
}

// postReview posts review to path on pod's port over TLS as the API server does (trusting
// roots, for host) and returns the response of the answer.
func postReview(ctx context.Context, c *suite.Cluster, pod *corev1.Pod, port int32, path, host string, roots *x509.CertPool, review *admissionv1.AdmissionReview) (*admissionv1.AdmissionResponse, error) {
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	client := keptAlive(func(ctx context.Context) (net.Conn, error) { return c.DialPod(ctx, pod, port) },
		&tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12})
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, reviewURL(host, port, path), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("posting an AdmissionReview to pod %s (%s): %w", pod.Name, path, err)
	}
	resp, err := reviewAnswer(res)
	if err != nil {
		return nil, fmt.Errorf("pod %s (%s): %w", pod.Name, path, err)
	}
	return resp, nil
}

// keptAlive is a client of one connection at a time, made by dial and kept alive between
// requests, as the API server's to a webhook (HTTP/1.1).
func keptAlive(dial func(context.Context) (net.Conn, error), cfg *tls.Config) *http.Client {
	return &http.Client{
		Timeout: reviewTimeout,
		Transport: &http.Transport{
			DialContext:     func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
			TLSClientConfig: cfg,
			MaxConnsPerHost: 1,
		},
	}
}

// reviewURL is where the API server posts a review to webhook path on a pod's port, for host
// (the Service's name), with the webhook's default timeout.
func reviewURL(host string, port int32, path string) string {
	return fmt.Sprintf("https://%s:%d%s?timeout=10s", host, port, path)
}

// reviewAnswer reads res, the answer to an AdmissionReview, closes its body and returns the
// review's response.
func reviewAnswer(res *http.Response) (*admissionv1.AdmissionResponse, error) {
	defer func() { _ = res.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("answered %s: %s", res.Status, bytes.TrimSpace(data))
	}
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &answer); err != nil || answer.Response == nil {
		return nil, fmt.Errorf("answered with no AdmissionReview response (%v): %s", err, data)
	}
	return answer.Response, nil
}

// lease is what W14 reads of a Lease: its holder and last renewal.
type lease struct {
	holder   string
	renewed  time.Time
	duration time.Duration
}

func (l lease) String() string {
	return fmt.Sprintf("held by %s, renewed %s", l.holder, l.renewed.Format(time.RFC3339Nano))
}

// leaseWatch is how long a Lease may go unrenewed by its holder before W14 gives up: its
// duration, plus room for a busy machine.
func leaseWatch(l lease) time.Duration { return max(l.duration, 15*time.Second) + 30*time.Second }

// leasesHeldBy are the Leases in ns whose holder names one of pods (leader election's
// identity starts with the pod's name), by name.
func leasesHeldBy(ctx context.Context, t *testing.T, c *suite.Cluster, ns string, pods []corev1.Pod) map[string]lease {
	t.Helper()
	list, err := c.Kube().CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	expect.NoError(t, err, "listing the Leases in %s", ns)
	held := map[string]lease{}
	for _, l := range list.Items {
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if holder == "" || !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return strings.HasPrefix(holder, p.Name) }) {
			continue
		}
		held[l.Name] = leaseOf(l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds)
	}
	return held
}

func readLease(ctx context.Context, c *suite.Cluster, ns, name string) (lease, error) {
	l, err := c.Kube().CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return lease{}, fmt.Errorf("getting Lease %s/%s: %w", ns, name, err)
	}
	return leaseOf(l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds), nil
}

func leaseOf(holder *string, renewed *metav1.MicroTime, seconds *int32) lease {
	var l lease
	if holder != nil {
		l.holder = *holder
	}
	if renewed != nil {
		l.renewed = renewed.Time
	}
	if seconds != nil {
		l.duration = time.Duration(*seconds) * time.Second
	}
	return l
}
