package leases

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// msgExiting is the operator's last log line before it exits non-zero (cmd/dynamo-operator),
// with the reason in its error.
const msgExiting = "operator exiting"

// fatalPath is one way a running B meets a fatal error after it took its Lease, caused only by
// what a user or the cluster could do.
type fatalPath struct {
	// what names it in messages.
	what string
	// reason is what B's "operator exiting" line must say.
	reason string
	// within bounds how long after the break B must have exited.
	within time.Duration
	// breakB does it to B, whose pod is pod; undo (may be nil) is the cleanup's, run after
	// B's RBAC is restored.
	breakB func(ctx context.Context, t *testing.T, c *suite.Cluster, pod *corev1.Pod)
	undo   func(ctx context.Context, t *testing.T, c *suite.Cluster, pod *corev1.Pod)
}

// fatalExits is M11: a restricted operator that exits on a fatal error deletes its Lease
// before the process ends, and the cluster-wide operator takes the namespace back at once
// rather than after the Lease expires. Each path is one a running operator really meets:
//
//   - its Role no longer lets it renew its Lease (a user tightening RBAC): it gives up before
//     the Lease expires, and exits;
//   - someone else takes its leader-election Lease (another release given the same
//     --leader-election-id, or a hand edit): controller-runtime's "leader election lost".
//
// Its restarts are kept from taking the namespace again — B may no longer create Leases — so
// what A does after the exit is A's alone.
func (s *scenarios) fatalExits() e2etypes.Feature {
	renewal := fatalPath{
		what:   "its Role no longer allows renewing the Lease (update and patch removed)",
		reason: "giving up the namespace lock Lease",
		breakB: func(ctx context.Context, t *testing.T, c *suite.Cluster, _ *corev1.Pod) {
			s.editLeaseRules(ctx, t, c, s.opB().rel.RestrictedNamespace(), s.opB().rel.DeploymentName(), "update", "patch")
		},
	}
	leader := fatalPath{
		what:   "its leader-election Lease was taken by someone else",
		reason: "leader election lost",
		breakB: func(ctx context.Context, t *testing.T, c *suite.Cluster, pod *corev1.Pod) {
			id := leaderElectionID(t, pod)
			// A new pod leads only once its predecessor's leader-election Lease expired; taken
			// before that, it was never B's to lose.
			expect.Eventually(ctx, t, fmt.Sprintf("%s pod %s to lead (hold Lease %s/%s)", s.opB(), pod.Name, pod.Namespace, id), recoverTimeout,
				func(ctx context.Context) (bool, string, error) {
					l, err := c.Kube().CoordinationV1().Leases(pod.Namespace).Get(ctx, id, metav1.GetOptions{})
					if err != nil {
						return false, err.Error(), nil
					}
					// controller-runtime's identity is <hostname>_<uuid>; a pod's hostname is its name.
					return strings.HasPrefix(holderOf(l), pod.Name+"_"), describeLease(l), nil
				})
			patch := fmt.Sprintf(`{"spec":{"holderIdentity":%q}}`, "m11-someone-else")
			_, err := c.Kube().CoordinationV1().Leases(pod.Namespace).Patch(ctx, id, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			expect.NoError(t, err, "taking B's leader-election Lease %s/%s over", pod.Namespace, id)
		},
		undo: func(ctx context.Context, t *testing.T, c *suite.Cluster, pod *corev1.Pod) {
			// B's next pod creates a fresh one instead of waiting for the stolen one to expire.
			id := leaderElectionID(t, pod)
			err := c.Kube().CoordinationV1().Leases(pod.Namespace).Delete(ctx, id, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				expect.Errorf(t, "deleting the leader-election Lease %s/%s taken over by M11: %v", pod.Namespace, id, err)
			}
		},
	}
	timings := func(t *testing.T) chart.LeaseTimings {
		l, err := s.topo.LeaseTimings()
		expect.NoError(t, err, "reading the lease timings of the topology")
		return l
	}
	return features.New("a restricted operator that exits on a fatal error deletes its Lease, and the cluster-wide one takes the namespace back at once").
		WithLabel(suite.LabelScenario, "M11").
		Setup(s.settledStep).
		Assess("B can no longer renew its Lease: it gives up, deletes it and exits", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			renewal.within = timings(t).Duration + observeTimeout
			s.fatalExit(ctx, t, renewal)
			return ctx
		}).
		Assess("B loses its leader election: it deletes its Lease and exits", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// controller-runtime's defaults: the leader gives up after its 10 s renew deadline.
			leader.within = 10*time.Second + observeTimeout
			s.fatalExit(ctx, t, leader)
			return ctx
		}).
		Feature()
}

// fatalExit breaks B along path and checks its exit, its Lease and A's takeover.
func (s *scenarios) fatalExit(ctx context.Context, t *testing.T, path fatalPath) {
	t.Helper()
	c := suite.ClusterFrom(ctx, t)
	a, b := s.opA(), s.opB()
	ns := b.rel.RestrictedNamespace()
	timings, err := s.topo.LeaseTimings()
	expect.NoError(t, err, "reading the lease timings of the topology")
	s.opB().settled(ctx, t, c)
	pod := s.opB().onlyPod(ctx, t, c)
	restartsBefore := restartCount(&pod)

	restoreRBAC := s.withholdLeaseCreation(ctx, t, c)
	t.Cleanup(func() {
		restoreRBAC()
		if path.undo != nil {
			path.undo(ctx, t, c, &pod)
		}
		// A fresh pod, rather than the crash-looping one's back-off.
		err := c.Kube().CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			expect.Errorf(t, "deleting %s pod %s/%s to restart it: %v", b, pod.Namespace, pod.Name, err)
		}
		s.opB().settled(ctx, t, c)
	})

	aLog := a.follow(ctx, c)
	defer aLog.stop()
	run := followRun(ctx, c, &pod)
	before := readLease(ctx, t, c, ns)
	if holderOf(before) != pod.Name {
		expect.Fatalf(t, "expected %s pod %s to hold Lease %s/%s before the break; saw %s", b, pod.Name, ns, release.NamespaceLockLease, describeLease(before))
	}
	lw := watchDeletion(ctx, t, c, before)
	defer lw.stop()
	// Probing from before the break, so A's first denial is timed by A, not by this scenario's
	// own waits.
	pr := startProber(ctx, c, ns, "m11")
	defer pr.stop()

	brokeAt := time.Now()
	path.breakB(ctx, t, c, &pod)
	t.Logf("broke %s at %s: %s", b, brokeAt.Format(time.RFC3339Nano), path.what)

	// B's process exits: the run that held the Lease ended, with a non-zero code.
	var exit corev1.ContainerStateTerminated
	expect.Eventually(ctx, t, fmt.Sprintf("%s pod %s to exit after %s", b, pod.Name, path.what), path.within,
		func(ctx context.Context) (bool, string, error) {
			got, err := c.Kube().CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			term, ok := firstExitSince(got, restartsBefore)
			if ok {
				exit = term
			}
			return ok, release.PodState(got), nil
		})
	if exit.ExitCode == 0 {
		expect.Errorf(t, "expected %s pod %s to exit non-zero after %s; it exited with code 0 (%s)", b, pod.Name, path.what, exit.Reason)
	}

	// The Lease was deleted by the exiting process, well before it would have expired.
	var deletedAt time.Time
	var last *coordinationv1.Lease
	select {
	case <-lw.deleted:
		deletedAt, last = lw.result()
	case <-time.After(timings.FailoverWindow()):
	}
	if last == nil {
		expect.Fatalf(t, "expected %s, which exited (code %d at %s) after %s, to delete Lease %s/%s before it ended; it was not deleted (%s after the exit: %s) — %s stays excluded by A until the Lease expires",
			b, exit.ExitCode, exit.FinishedAt.Format(time.RFC3339), path.what, ns, release.NamespaceLockLease, timings.FailoverWindow(), describeLease(readLease(ctx, t, c, ns)), ns)
	}
	if holderOf(last) != pod.Name {
		expect.Errorf(t, "expected the deleted Lease %s/%s to be held by B's exiting pod %s; it was %s", ns, release.NamespaceLockLease, pod.Name, describeLease(last))
	}
	expiry := last.Spec.RenewTime.Add(time.Duration(*last.Spec.LeaseDurationSeconds) * time.Second)
	if !deletedAt.Before(expiry) {
		expect.Errorf(t, "expected B's exiting process to delete Lease %s/%s before it expired at %s (%s); it was gone only at %s — left to expire, not released",
			ns, release.NamespaceLockLease, expiry.Format(time.RFC3339Nano), describeLease(last), deletedAt.Format(time.RFC3339Nano))
	}
	// FinishedAt has whole seconds.
	if finished := exit.FinishedAt.Add(time.Second); deletedAt.After(finished) {
		expect.Errorf(t, "expected B to delete Lease %s/%s before its process ended (%s); it was deleted at %s",
			ns, release.NamespaceLockLease, exit.FinishedAt.Format(time.RFC3339), deletedAt.Format(time.RFC3339Nano))
	}

	// Its log says why.
	entries, complete := run.wait(observeTimeout)
	i := slices.IndexFunc(entries, func(e logEntry) bool { return e.Msg == msgExiting && strings.Contains(e.Error, path.reason) })
	if i < 0 {
		var tail []string
		for _, e := range entries[max(0, len(entries)-5):] {
			tail = append(tail, fmt.Sprintf("%q error=%q", e.Msg, e.Error))
		}
		expect.Errorf(t, "expected the log of %s pod %s's exited run to say %q with an error containing %q; its last lines (%d read, run ended: %v): %s",
			b, pod.Name, msgExiting, path.reason, len(entries), complete, strings.Join(tail, "; "))
	} else {
		t.Logf("%s exited with code %d: %s: %s", b, exit.ExitCode, msgExiting, entries[i].Error)
	}

	// A takes team-a back at once: it denies an invalid object there within half the time the
	// Lease would have kept it off.
	activeTill := activeUntil(last, timings)
	bound := timings.FailoverWindow() / 2
	var first probe
	expect.Eventually(ctx, t, fmt.Sprintf("%s to deny an invalid DynamoGraphDeployment in %s after B deleted its Lease", a, ns), timings.FailoverWindow()+observeTimeout,
		func(context.Context) (bool, string, error) {
			probes := pr.answered()
			v := verdicts(aLog.entries(), ns)
			var ok bool
			first, ok = firstDenied(probes, v, deletedAt)
			return ok, fmt.Sprintf("A's view of the probes since the deletion: %s (A's logs read: %s)", describeProbes(since(probes, deletedAt), v), aLog.pods()), nil
		})
	took := first.done.Sub(deletedAt)
	if took > bound {
		expect.Errorf(t, "expected operator A to deny an invalid DynamoGraphDeployment in %s within %s of B deleting its Lease (half of leaseDuration + gracePeriod; left behind, the Lease would have kept A off until %s); the first denial, of probe %s, came after %.2fs",
			ns, bound, activeTill.Format(time.RFC3339Nano), first.name, took.Seconds())
	}
	if want := dynamo.DeniedBy(dynamo.GraphDeploymentValidatingWebhook); !strings.Contains(first.err, want) {
		expect.Errorf(t, "expected the API server to answer probe %s, which A denied, with %q; it said %q", first.name, want, first.err)
	}
	if n := reinclusions(aLog.entries(), ns)["deleted"]; n < 1 {
		expect.Errorf(t, "expected operator A to log %q about %s after B's exit; it did not", msgReincluded+"deleted", ns)
	}
	t.Logf("B exited with code %d at %s; Lease deleted at %s, %.2fs before it would have stopped excluding %s; A denied probe %s %.2fs after the deletion",
		exit.ExitCode, exit.FinishedAt.Format(time.RFC3339), deletedAt.Format(time.RFC3339Nano), activeTill.Sub(deletedAt).Seconds(), ns, first.name, took.Seconds())
	suite.Note(ctx, t, "exitCode", exit.ExitCode)
	suite.Note(ctx, t, "leaseDeletedBeforeActiveUntilSeconds", round3(activeTill.Sub(deletedAt).Seconds()))
	suite.Note(ctx, t, "takeBackSeconds", round3(took.Seconds()))
}

func restartCount(p *corev1.Pod) int32 {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == operatorContainer {
			return cs.RestartCount
		}
	}
	return 0
}

// firstExitSince is the termination of the operator container's first run that ended after
// restarts restarts: its current state while it has not restarted yet, its last termination
// once it restarted exactly once more.
func firstExitSince(p *corev1.Pod, restarts int32) (corev1.ContainerStateTerminated, bool) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != operatorContainer {
			continue
		}
		switch {
		case cs.RestartCount == restarts && cs.State.Terminated != nil:
			return *cs.State.Terminated, true
		case cs.RestartCount == restarts+1 && cs.LastTerminationState.Terminated != nil:
			return *cs.LastTerminationState.Terminated, true
		}
	}
	return corev1.ContainerStateTerminated{}, false
}

// leaderElectionID is the --leader-election-id of the pod's operator container.
func leaderElectionID(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	for _, ct := range p.Spec.Containers {
		if ct.Name != operatorContainer {
			continue
		}
		for _, arg := range append(slices.Clone(ct.Command), ct.Args...) {
			if id, ok := strings.CutPrefix(arg, "--leader-election-id="); ok {
				return id
			}
		}
	}
	expect.Fatalf(t, "expected pod %s/%s's %s container to have a --leader-election-id argument; it has none", p.Namespace, p.Name, operatorContainer)
	return ""
}

// withholdLeaseCreation removes "create" on Leases from B's two Roles (its own, in its
// namespace, and its leader-election Role): a running B only renews, so it keeps working, but
// its restarts can no longer take the namespace again. It returns the restore.
func (s *scenarios) withholdLeaseCreation(ctx context.Context, t *testing.T, c *suite.Cluster) func() {
	t.Helper()
	b := s.opB()
	roles := [][2]string{{b.rel.RestrictedNamespace(), b.rel.DeploymentName()}, {b.rel.Namespace, b.rel.DeploymentName() + "-leader-election"}}
	var originals []*rbacv1.Role
	for _, r := range roles {
		originals = append(originals, s.editLeaseRules(ctx, t, c, r[0], r[1], "create"))
	}
	return func() {
		for _, o := range originals {
			got, err := c.Kube().RbacV1().Roles(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				expect.Errorf(t, "reading Role %s/%s to restore it: %v", o.Namespace, o.Name, err)
				continue
			}
			got.Rules = o.Rules
			if _, err := c.Kube().RbacV1().Roles(o.Namespace).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
				expect.Errorf(t, "restoring Role %s/%s: %v", o.Namespace, o.Name, err)
			}
		}
	}
}

// editLeaseRules removes verbs from every rule of Role ns/name about coordination.k8s.io
// Leases (a rule left with no verb goes) and returns the Role as it was.
func (s *scenarios) editLeaseRules(ctx context.Context, t *testing.T, c *suite.Cluster, ns, name string, verbs ...string) *rbacv1.Role {
	t.Helper()
	roles := c.Kube().RbacV1().Roles(ns)
	role, err := roles.Get(ctx, name, metav1.GetOptions{})
	expect.NoError(t, err, "reading Role %s/%s (the chart's)", ns, name)
	original := role.DeepCopy()
	var rules []rbacv1.PolicyRule
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, "coordination.k8s.io") && slices.Contains(r.Resources, "leases") {
			r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return slices.Contains(verbs, v) })
			if len(r.Verbs) == 0 {
				continue
			}
		}
		rules = append(rules, r)
	}
	role.Rules = rules
	_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
	expect.NoError(t, err, "removing %v on Leases from Role %s/%s", verbs, ns, name)
	t.Logf("removed %v on Leases from Role %s/%s", verbs, ns, name)
	return original
}

// runLog is the log of one run of a pod's operator container, followed until the run ends.
type runLog struct {
	done    chan struct{}
	mu      sync.Mutex
	entries []logEntry
	ended   bool
}

// followRun follows the log of the operator container's current run in p until it ends.
func followRun(ctx context.Context, c *suite.Cluster, p *corev1.Pod) *runLog {
	r := &runLog{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		rc, err := c.Kube().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: operatorContainer, Follow: true}).Stream(ctx)
		if err != nil {
			return
		}
		defer func() { _ = rc.Close() }() // a log stream, read to its end
		err = readLog(p.Name, rc, func(e logEntry) {
			r.mu.Lock()
			r.entries = append(r.entries, e)
			r.mu.Unlock()
		})
		r.mu.Lock()
		r.ended = err == nil
		r.mu.Unlock()
	}()
	return r
}

// wait returns the run's lines once its log ended, or after timeout with what was read and
// false.
func (r *runLog) wait(timeout time.Duration) ([]logEntry, bool) {
	select {
	case <-r.done:
	case <-time.After(timeout):
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.entries), r.ended
}

// leaseDeletion watches a Lease for its deletion.
type leaseDeletion struct {
	deleted chan struct{}
	// ended is closed once the watch has ended (stopped, or its context done).
	ended  chan struct{}
	cancel func()
	mu     sync.Mutex
	at     time.Time
	last   *coordinationv1.Lease
}

// watchDeletion watches the Lease from its version before and closes deleted when it is
// deleted, keeping when and its last version.
func watchDeletion(ctx context.Context, t *testing.T, c *suite.Cluster, before *coordinationv1.Lease) *leaseDeletion {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	w, err := c.Kube().CoordinationV1().Leases(before.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + before.Name, ResourceVersion: before.ResourceVersion})
	if err != nil {
		cancel()
		expect.Fatalf(t, "watching Lease %s/%s: %v", before.Namespace, before.Name, err)
	}
	d := &leaseDeletion{deleted: make(chan struct{}), ended: make(chan struct{}), cancel: func() { cancel(); w.Stop() }}
	t.Cleanup(d.stop)
	go func() {
		defer close(d.ended)
		last := before
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				last = l
			case watch.Deleted:
				d.mu.Lock()
				d.at, d.last = time.Now(), last
				d.mu.Unlock()
				close(d.deleted)
				return
			}
		}
	}()
	return d
}

// result is when the Lease was deleted and its last version; nil before the deletion.
func (d *leaseDeletion) result() (time.Time, *coordinationv1.Lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at, d.last
}

// stop ends the watch and waits until it has: result then says all the watch saw.
func (d *leaseDeletion) stop() {
	d.cancel()
	<-d.ended
}
