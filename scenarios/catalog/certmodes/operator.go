package certmodes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// podGeneration is what tells a user that an operator pod was not restarted: the same pods
// (UIDs) with the same container restart counts.
type podGeneration map[string]string // pod UID → "name (restarts: container=n …)"

// snapshotPods records the release's operator pods and their restart counts.
func snapshotPods(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) podGeneration {
	t.Helper()
	pods, err := release.OperatorPods(ctx, c.Kube(), r)
	expect.NoError(t, err, "listing the operator pods of %s", r)
	out := podGeneration{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		out[string(p.UID)] = describeRestarts(&p)
	}
	return out
}

func describeRestarts(p *corev1.Pod) string {
	var parts []string
	for _, cs := range p.Status.ContainerStatuses {
		parts = append(parts, fmt.Sprintf("%s=%d", cs.Name, cs.RestartCount))
	}
	return fmt.Sprintf("%s (restarts: %s)", p.Name, strings.Join(parts, " "))
}

func (g podGeneration) String() string {
	out := make([]string, 0, len(g))
	for uid, d := range g {
		out = append(out, d+" uid "+uid)
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// expectSamePods fails unless the operator pods are exactly those of before, none restarted.
func expectSamePods(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, before podGeneration, why string) {
	t.Helper()
	now := snapshotPods(ctx, t, c, r)
	if now.String() != before.String() {
		expect.Errorf(t, "operator pods of %s %s: expected the same pods without restarts, %s; saw %s", r, why, before, now)
	}
}

// operatorReplicas is the replica count the release's Deployment asks for.
func operatorReplicas(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) int32 {
	t.Helper()
	s, err := c.Kube().AppsV1().Deployments(r.Namespace).GetScale(ctx, r.DeploymentName(), metav1.GetOptions{})
	expect.NoError(t, err, "getting the scale of Deployment %s/%s", r.Namespace, r.DeploymentName())
	return s.Spec.Replicas
}

// scaleOperator does `kubectl scale deployment --replicas=n` and waits for the result: no pod
// left for 0, the Deployment Available otherwise.
func scaleOperator(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, n int32) {
	t.Helper()
	expect.NoError(t, release.ScaleDeployment(ctx, c.Kube(), r.Namespace, r.DeploymentName(), n, rolloutTimeout), "scaling %s", r)
}

// operatorLogs returns the current logs of every operator pod, by pod name.
func operatorLogs(ctx context.Context, c *suite.Cluster, r *chart.Release) (map[string]string, error) {
	pods, err := release.OperatorPods(ctx, c.Kube(), r)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pods {
		raw, err := c.Kube().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "operator"}).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("getting the logs of pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		out[p.Name] = string(raw)
	}
	return out, nil
}

// expectLogLine waits until a log line of some operator pod contains every one of parts (what
// `kubectl logs` shows a user), quoting the operator's certificate-related lines otherwise.
func expectLogLine(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, what string, parts ...string) {
	t.Helper()
	expect.Eventually(ctx, t, fmt.Sprintf("an operator log line %s (containing %q)", what, parts), convergeTimeout, func(ctx context.Context) (bool, string, error) {
		logs, err := operatorLogs(ctx, c, r)
		if err != nil {
			return false, err.Error(), nil
		}
		var related []string
		for pod, log := range logs {
			for line := range strings.Lines(log) {
				if containsAll(line, parts...) {
					return true, "", nil
				}
				if strings.Contains(line, "certificate") || strings.Contains(line, "Secret") {
					related = append(related, pod+": "+strings.TrimSpace(line))
				}
			}
		}
		if len(related) == 0 {
			return false, "no certificate-related log line", nil
		}
		return false, "certificate-related lines: " + strings.Join(related, " | "), nil
	})
}

// expectAdmission waits until the release's webhooks answer through the API server.
func expectAdmission(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release, when string) {
	t.Helper()
	expect.NoError(t, release.WaitAdmission(ctx, c.Dynamic(), r, admissionTimeout), "admission %s", when)
}

// checkInterval is webhook.checkInterval: how often the operator re-checks its certificates.
func checkInterval(t *testing.T, r *chart.Release) time.Duration {
	t.Helper()
	d, err := r.CheckInterval()
	expect.NoError(t, err, "reading the release's check interval")
	return d
}

// certificateLookAhead is webhook.certificateValidity.lookAhead: how long before expiry the
// operator replaces a certificate.
func certificateLookAhead(t *testing.T, r *chart.Release) time.Duration {
	t.Helper()
	d, err := r.CertificateLookAhead()
	expect.NoError(t, err, "reading the release's certificate look-ahead")
	return d
}
