package troubleshooting

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// newerChartArg is what a chart newer than its image might pass: a certificate mode this
// operator binary does not know.
const newerChartArg = "--webhook-cert-mode=vault"

// How the operator refuses it: exit code 2 and this line on stderr.
const (
	newerChartExit    = 2
	newerChartMessage = `dynamo-operator: --webhook-cert-mode: unknown webhook certificate mode "vault"`
)

// operatorContainer is the operator's container in its pod.
const operatorContainer = "operator"

// stalledRollout is T13: a new operator pod that cannot start. The chart's rolling update
// (maxUnavailable 0) keeps the old pod serving, so admission goes on while the rollout stalls,
// and the new pod's log says why it exits — the one place a user can read it. (A flag the
// binary does not know at all is the flag package's to report; a value it does not know is the
// operator's.)
func stalledRollout() e2etypes.Feature {
	var ns string
	var before map[types.UID]bool
	return features.New("T13 a new operator pod that cannot start (a certificate mode its binary does not know, as from a chart newer than its image) stalls the rollout: the old pod keeps admitting, the new pod's log names the option and the value").
		WithLabel(suite.LabelScenario, "T13").
		Setup(baseline("t13", &ns)).
		Assess("fault: the operator container given "+newerChartArg, suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			var err error
			before, err = release.OperatorPodUIDs(ctx, c.Kube(), r)
			expect.NoError(t, err, "listing the operator's pods")
			expect.NoError(t, addOperatorArg(ctx, c, r, newerChartArg), "adding %s to Deployment %s/%s", newerChartArg, r.Namespace, r.DeploymentName())
			return ctx
		})).
		Assess("symptom: the new pod exits with code 2 and its log names the option and the value; the old pod keeps admitting", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			what := fmt.Sprintf("a new operator pod of %s to exit with code %d and its log (kubectl logs --previous) to say %q", r, newerChartExit, newerChartMessage)
			expect.Eventually(ctx, t, what, rolloutTimeout, func(ctx context.Context) (bool, string, error) {
				return exitedSaying(ctx, c, r, before, newerChartExit, newerChartMessage)
			})
			expectDenied(ctx, t, c, ns, "invalid")
			return ctx
		})).
		Assess("fix: helm upgrade (chart and image of one version); the rollout completes", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expect.NoError(t, helmUpgrade(ctx, c, r), "helm upgrade of %s", r)
			expectDenied(ctx, t, c, ns, "invalid-after")
			return ctx
		})).
		Teardown(upgradeBack("restoring the chart's arguments of")).
		Teardown(restored(&ns)).
		Feature()
}

// addOperatorArg appends arg to the operator container's arguments, as `kubectl edit` would.
func addOperatorArg(ctx context.Context, c *suite.Cluster, r *chart.Release, arg string) error {
	d, err := c.Kube().AppsV1().Deployments(r.Namespace).Get(ctx, r.DeploymentName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	for i, ct := range d.Spec.Template.Spec.Containers {
		if ct.Name != operatorContainer {
			continue
		}
		patch, err := json.Marshal([]map[string]any{{"op": "add", "path": fmt.Sprintf("/spec/template/spec/containers/%d/args/-", i), "value": arg}})
		if err != nil {
			return err
		}
		_, err = c.Kube().AppsV1().Deployments(r.Namespace).Patch(ctx, r.DeploymentName(), types.JSONPatchType, patch, metav1.PatchOptions{})
		return err
	}
	return fmt.Errorf("no container %q in Deployment %s/%s", operatorContainer, r.Namespace, r.DeploymentName())
}

// exitedSaying says whether an operator pod not in before has an operator container whose last
// run exited with code and whose log of that run contains want; seen describes the pods. A run
// that exited with code without saying want is an error: its log will not change.
func exitedSaying(ctx context.Context, c *suite.Cluster, r *chart.Release, before map[types.UID]bool, code int32, want string) (bool, string, error) {
	pods, err := release.OperatorPods(ctx, c.Kube(), r)
	if err != nil {
		return false, "", err
	}
	var seen []string
	for _, p := range pods {
		if before[p.UID] {
			continue
		}
		restarted := false
		for _, cs := range p.Status.ContainerStatuses {
			last := cs.LastTerminationState.Terminated
			if cs.Name != operatorContainer || last == nil {
				continue
			}
			restarted = true
			raw, err := c.Kube().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: operatorContainer, Previous: true}).DoRaw(ctx)
			log := strings.TrimSpace(string(raw))
			if err != nil {
				log = "reading it: " + err.Error()
			}
			switch {
			case last.ExitCode == code && strings.Contains(log, want):
				return true, "", nil
			case last.ExitCode == code && err == nil:
				// That run's log is all there is: it will not say more.
				return false, "", fmt.Errorf("pod %s/%s exited with code %d, as expected, without saying why: its log (kubectl logs --previous) does not say %q; it is %q", p.Namespace, p.Name, code, want, shorten(log, 300))
			}
			seen = append(seen, fmt.Sprintf("pod %s: exit code %d, its log %q", p.Name, last.ExitCode, shorten(log, 300)))
		}
		if !restarted {
			seen = append(seen, fmt.Sprintf("pod %s not restarted yet (%s)", p.Name, release.PodState(&p)))
		}
	}
	if len(seen) == 0 {
		return false, "no new pod yet", nil
	}
	return false, strings.Join(seen, "; "), nil
}

// shorten cuts s to n bytes, marking the cut: a log quoted in a message.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
