package leases

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// settledStep is settled as a feature step: the Setup of the scenarios that start from the
// topology as installed.
func (s *scenarios) settledStep(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	s.opB().settled(ctx, t, suite.ClusterFrom(ctx, t))
	return ctx
}

// settled waits until the topology is in its steady state — B's Deployment Available with
// one pod, B's pod holding a fresh Lease, every pod of A excluding B's namespace, and B's
// webhooks answering through the API server (a node's Service routing follows a new pod a
// moment after it is Ready; until then B's namespace is validated by nobody) — and returns
// B's pod (the Lease holder).
func (b restricted) settled(ctx context.Context, t *testing.T, c *suite.Cluster) string {
	t.Helper()
	a := b.a
	ns := b.rel.RestrictedNamespace()
	if err := release.WaitDeploymentAvailable(ctx, c.Kube(), b.rel.Namespace, b.rel.DeploymentName(), recoverTimeout); err != nil {
		expect.Fatalf(t, "%s is not running: %v", b, err)
	}
	if _, err := release.WaitLeaseHeld(ctx, c.Kube(), b.rel, recoverTimeout); err != nil {
		expect.Fatalf(t, "%s does not hold its Lease: %v", b, err)
	}
	// A pod of B that an earlier scenario replaced may still be terminating, running and
	// holding the Lease (replicas of B take it over from each other): a stop of the new pod
	// would then stop the wrong one.
	var holder string
	expect.Eventually(ctx, t, fmt.Sprintf("%s to have one pod left, none terminating, and that pod to hold Lease %s/%s", b, ns, release.NamespaceLockLease), recoverTimeout,
		func(ctx context.Context) (bool, string, error) {
			pods, err := release.OperatorPods(ctx, c.Kube(), b.rel)
			if err != nil {
				return false, err.Error(), nil
			}
			var states []string
			for i := range pods {
				states = append(states, release.PodState(&pods[i]))
			}
			if len(pods) != 1 {
				return false, fmt.Sprintf("pods: %s", strings.Join(states, "; ")), nil
			}
			l, err := c.Kube().CoordinationV1().Leases(ns).Get(ctx, release.NamespaceLockLease, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			holder = ptr.Deref(l.Spec.HolderIdentity, "")
			return holder == pods[0].Name, fmt.Sprintf("Lease held by %q; pod %s", holder, states[0]), nil
		})
	expect.Eventually(ctx, t, fmt.Sprintf("every pod of %s to report namespace %s excluded (%s{namespace=%q} = 1)", a, ns, metricExcluded, ns), recoverTimeout,
		func(ctx context.Context) (bool, string, error) {
			pods, err := a.runningPods(ctx, c)
			if err != nil || len(pods) == 0 {
				return false, fmt.Sprintf("running pods: %d, %v", len(pods), err), nil
			}
			m, err := a.scrape(ctx, c)
			if err != nil {
				return false, err.Error(), nil
			}
			got := m.Sum(metricExcluded, map[string]string{labelNamespace: ns})
			return got == float64(len(pods)), fmt.Sprintf("%g of %d pods report it excluded", got, len(pods)), nil
		})
	// A skips the namespace now, so a denial there is B's.
	if err := release.WaitAdmission(ctx, c.Dynamic(), b.rel, recoverTimeout); err != nil {
		expect.Fatalf(t, "%s holds its Lease, but its webhooks do not answer: %v", b, err)
	}
	return holder
}

// readLease returns B's Lease, or nil when there is none.
func readLease(ctx context.Context, t *testing.T, c *suite.Cluster, ns string) *coordinationv1.Lease {
	t.Helper()
	lease, err := c.Kube().CoordinationV1().Leases(ns).Get(ctx, release.NamespaceLockLease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	expect.NoError(t, err, "getting Lease %s/%s", ns, release.NamespaceLockLease)
	return lease
}

func holderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func describeLease(l *coordinationv1.Lease) string {
	if l == nil {
		return "no Lease"
	}
	renew := "never"
	if l.Spec.RenewTime != nil {
		renew = l.Spec.RenewTime.Format(time.RFC3339Nano)
	}
	dur := "unset"
	if l.Spec.LeaseDurationSeconds != nil {
		dur = strconv.Itoa(int(*l.Spec.LeaseDurationSeconds)) + "s"
	}
	return fmt.Sprintf("Lease %s/%s (uid %s) held by %q, renewed %s, duration %s", l.Namespace, l.Name, l.UID, holderOf(l), renew, dur)
}

// onlyPod returns B's single running pod.
func (b restricted) onlyPod(ctx context.Context, t *testing.T, c *suite.Cluster) corev1.Pod {
	t.Helper()
	pods, err := b.runningPods(ctx, c)
	expect.NoError(t, err, "listing the pods of %s", b)
	if len(pods) != 1 {
		names := make([]string, 0, len(pods))
		for _, p := range pods {
			names = append(names, p.Name)
		}
		expect.Fatalf(t, "expected one running pod of %s, saw %d: %v", b, len(pods), names)
	}
	return pods[0]
}

// kill kills B's pod without letting it clean up, the way a node failure or the OOM killer
// would, and keeps it from coming back: the operator container is frozen (so it can neither
// renew nor release its Lease from this instant, which is returned), the Deployment is scaled
// to 0 so no replacement starts, and once the pod is being deleted the container is killed
// (SIGKILL). The SIGTERM of the pod's deletion is never handled: a frozen process runs no
// handler, and the kill comes first. How a container is frozen and killed is the provider's.
func (b restricted) kill(ctx context.Context, t *testing.T, c *suite.Cluster) stopped {
	t.Helper()
	st := b.freeze(ctx, t, c)
	b.removeFrozen(ctx, t, c, st.pod)
	return st
}

// stopped is how B went away: which pod, when the stop was asked for, and by when it had
// surely taken effect (the provider had returned; on kind a freeze or kill is a `docker exec`,
// and lands somewhere in between). Answers after asked belong to the failover window; a Lease
// renewed after effective was renewed by a process that should no longer run.
type stopped struct {
	pod              string
	asked, effective time.Time
}

// freeze freezes B's operator container (it neither runs nor handles signals) and leaves the
// pod in place.
func (b restricted) freeze(ctx context.Context, t *testing.T, c *suite.Cluster) stopped {
	t.Helper()
	p := b.onlyPod(ctx, t, c)
	st := stopped{pod: p.Name, asked: time.Now()}
	if err := c.Container(ctx, &p, operatorContainer, cluster.Freeze); err != nil {
		expect.Fatalf(t, "freezing %s pod %s/%s: %v", b, p.Namespace, p.Name, err)
	}
	st.effective = time.Now()
	t.Logf("froze %s pod %s/%s: asked at %s, in effect by %s", b, p.Namespace, p.Name, st.asked.Format(time.RFC3339Nano), st.effective.Format(time.RFC3339Nano))
	return st
}

// removeFrozen takes B's frozen pod away without letting it run again: the Deployment is
// scaled to 0 so no replacement starts, and once the pod is being deleted the container is
// killed (SIGKILL) — the SIGTERM of the deletion is never handled.
func (b restricted) removeFrozen(ctx context.Context, t *testing.T, c *suite.Cluster, pod string) {
	t.Helper()
	p := b.deletedAfterScaleToZero(ctx, t, c, pod)
	if err := c.Container(ctx, p, operatorContainer, cluster.Kill); err != nil {
		expect.Fatalf(t, "killing %s pod %s/%s: %v", b, p.Namespace, p.Name, err)
	}
	waitPodGone(ctx, t, c, *p)
}

// sigkill kills B's running process with SIGKILL (kill -9): no handler runs, the Lease is
// left behind and connections to the pod are refused from then on. A container killed in a
// running pod is restarted by its node at once and would take its Lease back, so B is scaled to
// 0 first and killed while its pod is being deleted but still in its preStop delay (the
// chart's shutdownDelaySeconds): the process runs untouched until the kill, since SIGTERM comes
// only after the delay, and a node does not restart a container of a pod it has begun stopping
// (deletedAfterScaleToZero waits for that).
func (b restricted) sigkill(ctx context.Context, t *testing.T, c *suite.Cluster) stopped {
	t.Helper()
	running := b.onlyPod(ctx, t, c)
	if delay := preStopSleep(&running); delay < 2*time.Second {
		expect.Fatalf(t, "kill -9 of %s pod %s/%s: expected a preStop delay of at least 2s (chart value shutdownDelaySeconds) to kill the process before its SIGTERM, saw %s",
			b, running.Namespace, running.Name, delay)
	}
	p := b.deletedAfterScaleToZero(ctx, t, c, running.Name)
	st := stopped{pod: p.Name, asked: time.Now()}
	if err := c.Container(ctx, p, operatorContainer, cluster.Kill); err != nil {
		expect.Fatalf(t, "killing %s pod %s/%s: %v", b, p.Namespace, p.Name, err)
	}
	st.effective = time.Now()
	t.Logf("killed %s pod %s/%s with SIGKILL: asked at %s (%.2fs into its deletion), in effect by %s", b, p.Namespace, p.Name, st.asked.Format(time.RFC3339Nano),
		st.asked.Sub(deletionBegan(p)).Seconds(), st.effective.Format(time.RFC3339Nano))
	waitPodGone(ctx, t, c, *p)
	return st
}

// deletionBegan is when p's deletion was asked for: its deletionTimestamp is when its grace
// period ends, not when the deletion began.
func deletionBegan(p *corev1.Pod) time.Time {
	began := p.DeletionTimestamp.Time
	if grace := p.DeletionGracePeriodSeconds; grace != nil {
		began = began.Add(-time.Duration(*grace) * time.Second)
	}
	return began
}

// deletedAfterScaleToZero scales B to 0 and returns B's pod once it is being deleted and its
// node has begun stopping it.
func (b restricted) deletedAfterScaleToZero(ctx context.Context, t *testing.T, c *suite.Cluster, pod string) *corev1.Pod {
	t.Helper()
	b.scale(ctx, t, c, 0)
	var deleting *corev1.Pod
	what := fmt.Sprintf("pod %s/%s to be deleted after scaling %s to 0", b.rel.Namespace, pod, b)
	expect.NoError(t, poll.UntilEvery(ctx, what, 20*time.Millisecond, observeTimeout, func(ctx context.Context) (bool, string, error) {
		got, err := c.Kube().CoreV1().Pods(b.rel.Namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		deleting = got
		return got.DeletionTimestamp != nil, release.PodState(got), nil
	}), "stopping %s", b)
	// A node restarts a container that exits in a pod it does not yet know is being deleted,
	// and the restarted process takes its Lease back (it holds it under the pod's name): a busy
	// node learns of the deletion a moment after the API server. So the pod's container is
	// killed only once its node has begun stopping it (the node's Killing event).
	what = fmt.Sprintf("the node to begin stopping pod %s/%s (event %s)", b.rel.Namespace, pod, eventKilling)
	selector := fields.Set{"involvedObject.uid": string(deleting.UID), "reason": eventKilling}.String()
	expect.NoError(t, poll.UntilEvery(ctx, what, 20*time.Millisecond, observeTimeout, func(ctx context.Context) (bool, string, error) {
		events, err := c.Kube().CoreV1().Events(b.rel.Namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return false, err.Error(), nil
		}
		return len(events.Items) > 0, fmt.Sprintf("%d events %s", len(events.Items), selector), nil
	}), "stopping %s", b)
	return deleting
}

// eventKilling is the reason of the event a node records as it begins to stop a container.
const eventKilling = "Killing"

// preStopSleep is the preStop sleep of the pod's operator container, 0 when it has none.
func preStopSleep(p *corev1.Pod) time.Duration {
	for _, ct := range p.Spec.Containers {
		if ct.Name == operatorContainer && ct.Lifecycle != nil && ct.Lifecycle.PreStop != nil && ct.Lifecycle.PreStop.Sleep != nil {
			return time.Duration(ct.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		}
	}
	return 0
}

// stop stops B gracefully (`kubectl scale --replicas=0`: SIGTERM, the operator shuts down and
// releases its Lease); it is in effect once the pod is gone.
func (b restricted) stop(ctx context.Context, t *testing.T, c *suite.Cluster) stopped {
	t.Helper()
	p := b.onlyPod(ctx, t, c)
	st := stopped{pod: p.Name, asked: time.Now()}
	b.scale(ctx, t, c, 0)
	waitPodGone(ctx, t, c, p)
	st.effective = time.Now()
	return st
}

// start scales B back to one replica and waits for the steady state; it returns B's new pod.
func (b restricted) start(ctx context.Context, t *testing.T, c *suite.Cluster) string {
	t.Helper()
	b.scale(ctx, t, c, 1)
	return b.settled(ctx, t, c)
}

// restore is a cleanup: whatever a scenario did to B, the next one finds it running.
func (b restricted) restore(ctx context.Context, t *testing.T) {
	c := suite.ClusterFrom(ctx, t)
	d, err := c.Kube().AppsV1().Deployments(b.rel.Namespace).Get(ctx, b.rel.DeploymentName(), metav1.GetOptions{})
	if err != nil {
		t.Logf("restoring %s: %v", b, err)
		return
	}
	if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
		b.start(ctx, t, c)
	}
}

func (b restricted) scale(ctx context.Context, t *testing.T, c *suite.Cluster, replicas int) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	_, err := c.Kube().AppsV1().Deployments(b.rel.Namespace).Patch(ctx, b.rel.DeploymentName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	expect.NoError(t, err, "scaling Deployment %s/%s to %d", b.rel.Namespace, b.rel.DeploymentName(), replicas)
}

func waitPodGone(ctx context.Context, t *testing.T, c *suite.Cluster, p corev1.Pod) {
	t.Helper()
	expect.Eventually(ctx, t, fmt.Sprintf("pod %s/%s to be gone", p.Namespace, p.Name), recoverTimeout,
		func(ctx context.Context) (bool, string, error) {
			got, err := c.Kube().CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return true, "", nil
			case err != nil:
				return false, err.Error(), nil
			case got.UID != p.UID:
				return true, "", nil
			}
			return false, release.PodState(got), nil
		})
}

// restarts are the restart counts of op's pods, by pod.
func restarts(ctx context.Context, t *testing.T, c *suite.Cluster, op operator) map[string]int32 {
	t.Helper()
	pods, err := op.runningPods(ctx, c)
	expect.NoError(t, err, "listing the pods of %s", op)
	out := map[string]int32{}
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == operatorContainer {
				out[p.Name] = cs.RestartCount
			}
		}
	}
	return out
}

// expectNoRestarts fails when a pod of op that ran before (restart counts in before) restarted
// or vanished since: a measurement across an operator restart says nothing about the lease.
func expectNoRestarts(ctx context.Context, t *testing.T, c *suite.Cluster, op operator, before map[string]int32) {
	t.Helper()
	pods, err := release.OperatorPods(ctx, c.Kube(), op.rel)
	expect.NoError(t, err, "listing the pods of %s", op)
	for name, n := range before {
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == name })
		if i < 0 {
			expect.Errorf(t, "%s's pod %s disappeared during the measurement; the scenario did not stop it", op, name)
			continue
		}
		for _, cs := range pods[i].Status.ContainerStatuses {
			if cs.Name != operatorContainer || cs.RestartCount == n {
				continue
			}
			last := "unknown"
			if term := cs.LastTerminationState.Terminated; term != nil {
				last = fmt.Sprintf("exit code %d (%s) at %s", term.ExitCode, term.Reason, term.FinishedAt.Format(time.RFC3339))
			}
			expect.Errorf(t, "%s's container in pod %s restarted during the measurement (restarts %d → %d, last termination: %s), which the scenario did not cause: the measurement is void",
				op, name, n, cs.RestartCount, last)
		}
	}
}

// installOthers installs the restricted operators of ops (by namespace; "" is B's) that a
// scenario adds beside B, and waits until each holds its Lease and A steps back from its
// namespace.
func installOthers(ctx context.Context, t *testing.T, c *suite.Cluster, ops map[string]restricted) {
	t.Helper()
	for _, ns := range added(ops) {
		expect.NoError(t, c.Installer().Install(ctx, ops[ns].rel), "installing %s", ops[ns])
	}
	for _, ns := range added(ops) {
		b := ops[ns]
		expect.NoError(t, c.Installer().WaitReady(ctx, b.rel, recoverTimeout), "waiting for %s", b)
		b.settled(ctx, t, c)
	}
}

// uninstallOthers removes what installOthers installed, with the namespaces, all at once: each
// mostly waits, for its pod's preStop delay and its namespace's deletion (about 10 s).
func uninstallOthers(ctx context.Context, t *testing.T, c *suite.Cluster, ops map[string]restricted) {
	t.Helper()
	namespaces := added(ops)
	errs := make([]error, len(namespaces))
	var wg sync.WaitGroup
	for i, ns := range namespaces {
		wg.Go(func() { errs[i] = c.Installer().Uninstall(ctx, ops[ns].rel, release.UninstallOptions{Namespace: true}) })
	}
	wg.Wait()
	for i, ns := range namespaces {
		expect.NoError(t, errs[i], "uninstalling %s", ops[ns])
	}
}

// added are the namespaces of ops' operators that a scenario installs beside B, sorted.
func added(ops map[string]restricted) []string {
	return slices.DeleteFunc(slices.Sorted(maps.Keys(ops)), func(ns string) bool { return ns == "" })
}

// installOwn is the Setup of a scenario that stops a restricted operator of its own, b: it
// installs b beside B, holding aRollouts shared since settling b needs A's pods as they are.
func (s *scenarios) installOwn(b restricted) features.Func {
	return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		s.aRollouts.RLock()
		defer s.aRollouts.RUnlock()
		installOthers(ctx, t, suite.ClusterFrom(ctx, t), map[string]restricted{b.rel.RestrictedNamespace(): b})
		return ctx
	}
}

// uninstallOwn is the Teardown of a scenario that installed b with installOwn.
func uninstallOwn(b restricted) features.Func {
	return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		uninstallOthers(ctx, t, suite.ClusterFrom(ctx, t), map[string]restricted{b.rel.RestrictedNamespace(): b})
		return ctx
	}
}
