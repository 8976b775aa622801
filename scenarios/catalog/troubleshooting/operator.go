package troubleshooting

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/jsonlog"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// What the scenarios do to the operator as a user would: helm upgrade with other values,
// kubectl scale, kubectl rollout restart, kubectl logs.

// withValues returns a copy of r whose chart values are r's with over merged into them (over
// wins), for a `helm upgrade --set …`; `helm upgrade` of r itself undoes it (the Installer
// upgrades with exactly the values it is given).
func withValues(r *chart.Release, over map[string]any) *chart.Release {
	changed := *r
	changed.Values = chart.MergeValues(r.Values, over)
	return &changed
}

// helmUpgrade runs `helm upgrade` of r and waits until its Deployment is Available (a values
// change may roll the operator's pods) and no pod of the previous rollout is left: a
// terminating pod keeps answering the API server over the connections it holds open (the
// chart's preStop sleep keeps it up for shutdownDelaySeconds), so until it is gone a webhook
// call may still meet the old settings.
func helmUpgrade(ctx context.Context, c *suite.Cluster, r *chart.Release) error {
	cp := *r // Upgrade writes defaults back; the caller's release stays as it was
	if err := c.Installer().Upgrade(ctx, &cp); err != nil {
		return err
	}
	if err := release.WaitDeploymentAvailable(ctx, c.Kube(), cp.Namespace, cp.DeploymentName(), rolloutTimeout); err != nil {
		return err
	}
	return release.WaitOldPodsGone(ctx, c.Kube(), &cp, rolloutTimeout)
}

// replicas reads the operator Deployment's desired replicas.
func replicas(ctx context.Context, c *suite.Cluster, r *chart.Release) (int32, error) {
	s, err := c.Kube().AppsV1().Deployments(r.Namespace).GetScale(ctx, r.DeploymentName(), metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("reading the scale of Deployment %s/%s: %w", r.Namespace, r.DeploymentName(), err)
	}
	return s.Spec.Replicas, nil
}

// scaleOperator does `kubectl scale --replicas=n` and waits for the result: no operator pod
// left for 0, the Deployment Available otherwise.
func scaleOperator(ctx context.Context, c *suite.Cluster, r *chart.Release, n int32) error {
	return release.ScaleDeployment(ctx, c.Kube(), r.Namespace, r.DeploymentName(), n, rolloutTimeout)
}

// rolloutRestart does `kubectl rollout restart` and `kubectl rollout status`: it waits until
// no pod of before is left and the Deployment is Available again.
func rolloutRestart(ctx context.Context, c *suite.Cluster, r *chart.Release) error {
	before, err := release.OperatorPodUIDs(ctx, c.Kube(), r)
	if err != nil {
		return err
	}
	if err := release.RolloutRestart(ctx, c.Kube(), r.Namespace, r.DeploymentName()); err != nil {
		return err
	}
	what := "the restarted Deployment " + r.Namespace + "/" + r.DeploymentName() + " to replace its pods"
	if err := poll.Until(ctx, what, rolloutTimeout, release.PodsReplaced(c.Kube(), r, before)); err != nil {
		return err
	}
	return release.WaitDeploymentAvailable(ctx, c.Kube(), r.Namespace, r.DeploymentName(), rolloutTimeout)
}

// logEntry is one line of the operator's JSON log (controller-runtime's zap), with the keys
// the scenarios look at.
type logEntry struct {
	Level     string `json:"level"`
	Logger    string `json:"logger"`
	Msg       string `json:"msg"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Result    string `json:"result"`
	Error     string `json:"error"`
}

// podLogs are the parsed logs of the operator container, by pod name.
type podLogs map[string][]logEntry

// operatorLogs reads the log of every operator pod through the API server, like
// `kubectl logs -l … -c operator`.
func operatorLogs(ctx context.Context, c *suite.Cluster, r *chart.Release) (podLogs, error) {
	pods, err := release.OperatorPods(ctx, c.Kube(), r)
	if err != nil {
		return nil, err
	}
	out := podLogs{}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		raw, err := c.Kube().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "operator"}).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the log of pod %s/%s container operator: %w", p.Namespace, p.Name, err)
		}
		var entries []logEntry
		// Only a line longer than jsonlog.MaxLine fails here (the operator writes none); the
		// entries before it are still worth reading.
		_ = jsonlog.Read(bytes.NewReader(raw), func(e logEntry) { entries = append(entries, e) })
		out[p.Name] = entries
	}
	return out, nil
}

// find returns the entries of every pod that match.
func (l podLogs) find(match func(logEntry) bool) []logEntry {
	var out []logEntry
	for _, pod := range slices.Sorted(maps.Keys(l)) {
		for _, e := range l[pod] {
			if match(e) {
				out = append(out, e)
			}
		}
	}
	return out
}

// admissionLine matches the webhook's per-call line ("validate create", "default", …) for
// object ns/name.
func admissionLine(msg, ns, name string) func(logEntry) bool {
	return func(e logEntry) bool { return e.Msg == msg && e.Namespace == ns && e.Name == name }
}

// serviceAccount is the operator pods' ServiceAccount.
func serviceAccount(ctx context.Context, c *suite.Cluster, r *chart.Release) (string, error) {
	d, err := c.Kube().AppsV1().Deployments(r.Namespace).Get(ctx, r.DeploymentName(), metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("getting Deployment %s/%s: %w", r.Namespace, r.DeploymentName(), err)
	}
	if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "" {
		return sa, nil
	}
	return "default", nil
}

// upgradeBack is a teardown step that helm-upgrades the suite's release back to its own values,
// undoing whatever value a scenario changed; what names that value in the failure message.
func upgradeBack(what string) features.Func {
	return suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
		if err := helmUpgrade(ctx, c, r); err != nil {
			expect.Errorf(t, "%s %s: %v", what, r, err)
		}
		return ctx
	})
}
