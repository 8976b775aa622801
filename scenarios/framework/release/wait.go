package release

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// WaitDeploymentAvailable waits until Deployment ns/name has rolled out: the current
// generation observed, every replica updated and available, condition Available=True, and no
// old replicas left.
//
// A pod of the current revision whose container crash-loops (CrashLoopBackOff after
// CrashLoopRestarts restarts) ends the wait at once: it will not come up by itself, and the
// error quotes the end of its previous run's log.
func WaitDeploymentAvailable(ctx context.Context, kube kubernetes.Interface, ns, name string, timeout time.Duration) error {
	return poll.Until(ctx, fmt.Sprintf("Deployment %s/%s to be Available", ns, name), timeout, func(ctx context.Context) (bool, string, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		pods := deploymentPods(ctx, kube, d)
		state := deploymentState(d, pods)
		if p, cs := crashLooping(ctx, kube, d, pods); p != nil {
			return false, state, fmt.Errorf("pod %s/%s is crash-looping: container %s restarted %d times (%s); the end of its last run's log:\n%s",
				p.Namespace, p.Name, cs.Name, cs.RestartCount, lastExit(cs), previousLogTail(ctx, kube, p, cs.Name))
		}
		return deploymentRolledOut(d), state, nil
	})
}

// CrashLoopRestarts is how many restarts in CrashLoopBackOff make a pod crash-looping for
// WaitDeploymentAvailable: a container that exits at startup gets there within about a minute
// (back-off 10 s, 20 s, 40 s); one that restarted once or twice for a passing reason does not.
const CrashLoopRestarts = 3

// crashLooping returns a pod of d's current revision (among pods, d's pods) and its container
// that crash-loops, if any. Pods of older revisions are the rollout's to replace. The current
// revision is looked up only when some pod crash-loops.
func crashLooping(ctx context.Context, kube kubernetes.Interface, d *appsv1.Deployment, pods []corev1.Pod) (*corev1.Pod, *corev1.ContainerStatus) {
	hash := ""
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		for j := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[j]
			if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.RestartCount < CrashLoopRestarts {
				continue
			}
			if hash == "" {
				if hash = currentTemplateHash(ctx, kube, d); hash == "" {
					return nil, nil
				}
			}
			if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == hash {
				return p, cs
			}
		}
	}
	return nil, nil
}

// currentTemplateHash is the pod-template-hash of d's ReplicaSet of its current revision, or
// "" when there is none yet.
func currentTemplateHash(ctx context.Context, kube kubernetes.Interface, d *appsv1.Deployment) string {
	const revision = "deployment.kubernetes.io/revision"
	if d.Spec.Selector == nil || d.Annotations[revision] == "" {
		return ""
	}
	sets, err := kube.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		return ""
	}
	for _, rs := range sets.Items {
		if rs.Annotations[revision] == d.Annotations[revision] && metav1.IsControlledBy(&rs, d) {
			return rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		}
	}
	return ""
}

// lastExit describes how a container's previous run ended.
func lastExit(cs *corev1.ContainerStatus) string {
	t := cs.LastTerminationState.Terminated
	if t == nil {
		return "its last exit is not recorded"
	}
	return fmt.Sprintf("last exit code %d, %s", t.ExitCode, t.Reason)
}

// previousLogTail is the last lines a container logged before its latest restart.
func previousLogTail(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod, container string) string {
	tail := int64(10)
	out, err := kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, Previous: true, TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return "(cannot read it: " + err.Error() + ")"
	}
	return strings.TrimRight(string(out), "\n")
}

func deploymentRolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
		return false
	}
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deploymentPods lists the pods of d's selector (none when that fails: they only describe).
func deploymentPods(ctx context.Context, kube kubernetes.Interface, d *appsv1.Deployment) []corev1.Pod {
	if d.Spec.Selector == nil {
		return nil
	}
	pods, err := kube.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		return nil
	}
	return pods.Items
}

// deploymentState describes a Deployment and its pods the way `kubectl get` and `describe`
// would, for timeout messages.
func deploymentState(d *appsv1.Deployment, pods []corev1.Pod) string {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	parts := []string{fmt.Sprintf("%d/%d replicas available, %d updated, %d total, generation %d observed %d",
		s.AvailableReplicas, want, s.UpdatedReplicas, s.Replicas, d.Generation, s.ObservedGeneration)}
	for _, c := range s.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Message))
	}
	for _, p := range pods {
		parts = append(parts, "pod "+PodState(&p))
	}
	return strings.Join(parts, "; ")
}

// PodReady reports the pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ContainerPort is the number of the pod's container port called name.
func ContainerPort(p *corev1.Pod, name string) (int32, bool) {
	for _, ct := range p.Spec.Containers {
		for _, port := range ct.Ports {
			if port.Name == name {
				return port.ContainerPort, true
			}
		}
	}
	return 0, false
}

// PodState is one line about a pod: phase, readiness, and each container's state.
func PodState(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", p.Name, p.Status.Phase)
	if p.DeletionTimestamp != nil {
		b.WriteString(" (terminating)")
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			fmt.Fprintf(&b, " Ready=%s", c.Status)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, " [%s restarts=%d", cs.Name, cs.RestartCount)
		switch {
		case cs.State.Waiting != nil:
			fmt.Fprintf(&b, " waiting %s: %s", cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			fmt.Fprintf(&b, " terminated %s exit %d", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		case cs.State.Running != nil:
			b.WriteString(" running")
		}
		b.WriteString("]")
	}
	return b.String()
}

// WaitPodsGone waits until no pod in ns matches selector.
func WaitPodsGone(ctx context.Context, kube kubernetes.Interface, ns, selector string, timeout time.Duration) error {
	return poll.Until(ctx, fmt.Sprintf("pods %s in %s to be gone", selector, ns), timeout, func(ctx context.Context) (bool, string, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error(), nil
		}
		var left []string
		for _, p := range pods.Items {
			left = append(left, PodState(&p))
		}
		return len(left) == 0, strings.Join(left, "; "), nil
	})
}

// WaitAdmission waits until the release's webhooks answer through the API server — the path
// users depend on (Service, TLS with the injected caBundle, the operator's handlers): a
// server-side dry run of an invalid DynamoGraphDeployment must be denied by the operator's
// validating webhook, and a dry run of a valid one must come back with the mutating webhook's
// origin-version annotation. "failed calling webhook" (no endpoint, unknown authority, …) is
// not an answer and is quoted as the last state seen.
func WaitAdmission(ctx context.Context, dyn dynamic.Interface, r *chart.Release, timeout time.Duration) error {
	ns := r.WebhookNamespace()
	denied := dynamo.DeniedBy(dynamo.GraphDeploymentValidatingWebhook)
	what := fmt.Sprintf("the webhooks of %s to answer: a dry-run DynamoGraphDeployment without services in %s denied with %q, a valid one stamped with %s",
		r, ns, denied, dynamo.OriginVersionAnnotation)
	return poll.Until(ctx, what, timeout, func(ctx context.Context) (bool, string, error) {
		dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		name := "gauntlet-probe-" + rand.String(5)
		_, err := dyn.Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, dynamo.InvalidGraphDeployment(ns, name), dry)
		switch {
		case err == nil:
			return false, "the invalid DynamoGraphDeployment was admitted (validating webhook not called)", nil
		case !strings.Contains(err.Error(), denied):
			return false, "dry-run create of the invalid DynamoGraphDeployment: " + err.Error(), nil
		}
		got, err := dyn.Resource(dynamo.GraphDeployments).Namespace(ns).Create(ctx, dynamo.GraphDeployment(ns, name), dry)
		if err != nil {
			return false, "dry-run create of the valid DynamoGraphDeployment: " + err.Error(), nil
		}
		if _, ok := got.GetAnnotations()[dynamo.OriginVersionAnnotation]; !ok {
			return false, fmt.Sprintf("the valid DynamoGraphDeployment came back without %s (annotations %v)", dynamo.OriginVersionAnnotation, got.GetAnnotations()), nil
		}
		return true, "", nil
	})
}

// WaitReady waits until r is usable: its Deployment Available and its webhooks answering
// through the API server (WaitAdmission). The timeout covers both.
func (i *Installer) WaitReady(ctx context.Context, r *chart.Release, timeout time.Duration) error {
	d := r.WithDefaults()
	deadline := time.Now().Add(timeout)
	start := time.Now()
	if err := WaitDeploymentAvailable(ctx, i.kube, d.Namespace, d.DeploymentName(), timeout); err != nil {
		return err
	}
	i.logf("Deployment %s/%s Available (%.1fs)", d.Namespace, d.DeploymentName(), time.Since(start).Seconds())
	if err := WaitOldPodsGone(ctx, i.kube, &d, time.Until(deadline)); err != nil {
		return err
	}
	start = time.Now()
	if err := WaitAdmission(ctx, i.dynamic, &d, time.Until(deadline)); err != nil {
		return err
	}
	i.logf("webhooks of %s answer through the API server (%.1fs)", &d, time.Since(start).Seconds())
	return nil
}

// WaitOldPodsGone waits until none of the release's operator pods is terminating. A pod of the
// previous rollout keeps running for the chart's shutdownDelaySeconds after the Deployment is
// Available — serving webhooks over the connections the API server holds open, holding a Lease,
// writing logs — so until it is gone a webhook call may still meet the old settings.
func WaitOldPodsGone(ctx context.Context, kube kubernetes.Interface, r *chart.Release, timeout time.Duration) error {
	d := r.WithDefaults()
	return WaitTerminatingGone(ctx, kube, d.Namespace, operatorSelector(&d), "Deployment "+d.Namespace+"/"+d.DeploymentName(), timeout)
}

// WaitTerminatingGone waits until none of the pods in ns that selector matches is terminating;
// of names their owner in messages ("Deployment ns/name"). After a rollout, until the pods of
// the previous revision are gone, a webhook call or a Lease may still meet the old settings.
func WaitTerminatingGone(ctx context.Context, kube kubernetes.Interface, ns, selector, of string, timeout time.Duration) error {
	return poll.Until(ctx, "the terminating pods of "+of+" to be gone", timeout, func(ctx context.Context) (bool, string, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, fmt.Sprintf("listing pods %s in %s: %v", selector, ns, err), nil
		}
		var terminating, states []string
		for _, p := range pods.Items {
			states = append(states, PodState(&p))
			if p.DeletionTimestamp != nil {
				terminating = append(terminating, p.Name)
			}
		}
		return len(terminating) == 0, fmt.Sprintf("terminating pods left: %v; pods: %s", terminating, strings.Join(states, "; ")), nil
	})
}

// OperatorPodUIDs lists the UIDs of the release's operator pods: what a restart must replace
// (PodsReplaced).
func OperatorPodUIDs(ctx context.Context, kube kubernetes.Interface, r *chart.Release) (map[types.UID]bool, error) {
	pods, err := OperatorPods(ctx, kube, r)
	if err != nil {
		return nil, err
	}
	return uidsOf(pods), nil
}

// PodsReplaced holds once a rollout replaced the operator pods whose UIDs are in before: none
// of the release's pods is one of them. It reports the old pods left and every pod's state.
func PodsReplaced(kube kubernetes.Interface, r *chart.Release, before map[types.UID]bool) poll.Condition {
	return replaced(before, func(ctx context.Context) ([]corev1.Pod, error) { return OperatorPods(ctx, kube, r) })
}

// replaced holds once none of the pods list gives is one of before.
func replaced(before map[types.UID]bool, list func(context.Context) ([]corev1.Pod, error)) poll.Condition {
	return func(ctx context.Context) (bool, string, error) {
		pods, err := list(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		var old, states []string
		for _, p := range pods {
			states = append(states, PodState(&p))
			if before[p.UID] {
				old = append(old, p.Name)
			}
		}
		return len(old) == 0, fmt.Sprintf("old pods left: %v; pods: %s", old, strings.Join(states, "; ")), nil
	}
}

// RolloutRestart does what `kubectl rollout restart` does: it stamps the pod template with
// kubectl.kubernetes.io/restartedAt, so the Deployment replaces every pod.
func RolloutRestart(ctx context.Context, kube kubernetes.Interface, ns, name string) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	_, err := kube.AppsV1().Deployments(ns).Patch(ctx, name, "application/strategic-merge-patch+json", []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("restarting Deployment %s/%s: %w", ns, name, err)
	}
	return nil
}

// ErrNoPods is returned by OperatorPods when a release has no pod.
var ErrNoPods = errors.New("no operator pod")

// OperatorPods lists the release's operator pods.
func OperatorPods(ctx context.Context, kube kubernetes.Interface, r *chart.Release) ([]corev1.Pod, error) {
	d := r.WithDefaults()
	sel := operatorSelector(&d)
	pods, err := kube.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing pods %s in %s: %w", sel, d.Namespace, err)
	}
	if len(pods.Items) == 0 {
		return nil, fmt.Errorf("%w of %s (selector %s)", ErrNoPods, &d, sel)
	}
	return pods.Items, nil
}

// operatorSelector selects the operator pods of r (with its defaults filled in).
func operatorSelector(r *chart.Release) string {
	return "app.kubernetes.io/name=" + chart.OperatorAppLabel + ",app.kubernetes.io/instance=" + r.Name
}
