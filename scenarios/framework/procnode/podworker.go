package procnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
)

const (
	// retryInterval paces retries of steps that wait on something outside the pod
	// (a missing Secret, an unmapped image); informer events usually wake the pod sooner.
	retryInterval = 2 * time.Second
	// resyncInterval refreshes volumes (projected tokens) of running pods.
	resyncInterval = 30 * time.Second
	// shutdownGraceCap bounds how long the node waits for its pods when it stops (pods stop
	// in parallel); the provider sends SIGKILL 15 s after SIGTERM.
	shutdownGraceCap = 8 * time.Second
)

// podWorker runs one pod: sandbox, volumes, containers, probes and status. All state is
// owned by its goroutine; others talk to it through setPod/post and a kick channel.
type podWorker struct {
	n   *node
	uid types.UID

	mu       sync.Mutex
	latest   *corev1.Pod
	gone     bool
	stopping bool
	inbox    []any
	kick     chan struct{}
	// running is the pod's containers as the kubelet API's stats see them: published by
	// the worker's goroutine at the end of each sync, read by the API's handlers under mu.
	running *runningPod

	pod        *corev1.Pod
	dir        string
	sandbox    bool
	podIP      string
	netnsPath  string
	volumes    map[string]string
	volumeErr  error
	startTime  metav1.Time
	runs       map[string]*containerRun
	backoff    *flowcontrol.Backoff // restart back-off, keyed by container name
	retryAt    time.Time
	lastStatus *corev1.PodStatus
}

func newPodWorker(n *node, pod *corev1.Pod) *podWorker {
	return &podWorker{
		n:       n,
		uid:     pod.UID,
		latest:  pod,
		kick:    make(chan struct{}, 1),
		dir:     filepath.Join(n.cfg.StateDir, "pods", string(pod.UID)),
		runs:    map[string]*containerRun{},
		backoff: flowcontrol.NewBackOff(n.cfg.CrashBackoffInitial, n.cfg.CrashBackoffMax),
	}
}

func (w *podWorker) setPod(pod *corev1.Pod) {
	w.mu.Lock()
	if pod == nil {
		w.gone = true
	} else {
		w.latest = pod
	}
	w.mu.Unlock()
	w.wake()
}

func (w *podWorker) post(msg any) {
	w.mu.Lock()
	w.inbox = append(w.inbox, msg)
	w.mu.Unlock()
	w.wake()
}

func (w *podWorker) shutdown() {
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	w.wake()
}

func (w *podWorker) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run is the worker's loop; it returns once the pod's processes are gone and its sandbox
// removed.
func (w *podWorker) run() {
	for {
		if done := w.sync(); done {
			return
		}
		timer := time.NewTimer(w.nextWake())
		select {
		case <-w.kick:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func (w *podWorker) nextWake() time.Duration {
	next := time.Now().Add(resyncInterval)
	if !w.retryAt.IsZero() && w.retryAt.Before(next) {
		next = w.retryAt
	}
	for _, r := range w.runs {
		if r.proc == nil && !r.nextStart.IsZero() && r.nextStart.Before(next) {
			next = r.nextStart
		}
	}
	if d := time.Until(next); d > 0 {
		return d
	}
	return time.Millisecond
}

// sync is one pass over the pod: a short list of named steps.
func (w *podWorker) sync() (done bool) {
	w.mu.Lock()
	if w.latest != nil {
		w.pod = w.latest
	}
	gone, stopping, inbox := w.gone, w.stopping, w.inbox
	w.inbox = nil
	w.mu.Unlock()
	defer w.publishRunning()
	ctx := context.Background()
	log := klog.FromContext(ctx).WithValues("pod", klog.KObj(w.pod))

	w.handleInbox(inbox)
	switch {
	case stopping:
		w.terminate(ctx, w.gracePeriod(shutdownGraceCap), false)
		return true
	case gone:
		w.terminate(ctx, 0, false)
		return true
	case w.pod.DeletionTimestamp != nil:
		w.terminate(ctx, w.gracePeriod(0), true)
		return true
	}
	w.retryAt = time.Time{}
	if w.startTime.IsZero() {
		w.startTime = metav1.Now().Rfc3339Copy()
	}
	if err := w.ensureSandbox(); err != nil {
		log.Error(err, "setting up pod sandbox")
		w.warn("FailedCreatePodSandBox", err.Error())
		w.retryAt = time.Now().Add(retryInterval)
		w.updateStatus(ctx)
		return false
	}
	w.ensureVolumes(ctx)
	if w.volumeErr == nil {
		if w.runInitContainers(ctx) {
			w.runContainers(ctx)
		}
	}
	w.updateStatus(ctx)
	return false
}

func (w *podWorker) gracePeriod(capAt time.Duration) time.Duration {
	secs := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if w.pod.Spec.TerminationGracePeriodSeconds != nil {
		secs = *w.pod.Spec.TerminationGracePeriodSeconds
	}
	if w.pod.DeletionGracePeriodSeconds != nil {
		secs = *w.pod.DeletionGracePeriodSeconds
	}
	d := time.Duration(secs) * time.Second
	if capAt > 0 && d > capAt {
		d = capAt
	}
	return d
}

// ensureSandbox gives the pod its network namespace and address, once.
func (w *podWorker) ensureSandbox() error {
	if w.sandbox {
		return nil
	}
	if err := os.MkdirAll(w.dir, 0o750); err != nil { // 0750, as kubelet's pod dirs
		return fmt.Errorf("creating pod dir %s: %w", w.dir, err)
	}
	if w.pod.Spec.HostNetwork {
		w.podIP = w.n.nodeIP
	} else if w.podIP == "" {
		ip, ns, err := w.n.network.addPod(string(w.uid))
		if err != nil {
			return err
		}
		w.podIP, w.netnsPath = ip, ns
	}
	if w.n.isolate {
		if err := w.writeNetworkFiles(); err != nil {
			return err
		}
	}
	w.sandbox = true
	return nil
}

// writeNetworkFiles prepares /etc/hosts and /etc/resolv.conf for the pod. The resolver
// points at the pod's own loopback where nothing answers, so lookups fail at once instead
// of hanging on an unreachable DNS server.
func (w *podWorker) writeNetworkFiles() error {
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n", w.podIP, w.pod.Name)
	resolv := "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"
	// 0644, as kubelet writes them: they become the pod's /etc/hosts and /etc/resolv.conf,
	// which every user in the pod reads.
	if err := os.WriteFile(filepath.Join(w.dir, "hosts"), []byte(hosts), 0o644); err != nil { //nolint:gosec // G306: see above
		return fmt.Errorf("writing hosts file for pod %s/%s: %w", w.pod.Namespace, w.pod.Name, err)
	}
	if err := os.WriteFile(filepath.Join(w.dir, "resolv.conf"), []byte(resolv), 0o644); err != nil { //nolint:gosec // G306: see above
		return fmt.Errorf("writing resolv.conf for pod %s/%s: %w", w.pod.Namespace, w.pod.Name, err)
	}
	return nil
}

// ensureVolumes (re)writes the pod's volumes; updates of Secrets and ConfigMaps reach the
// files through the atomic writer.
func (w *podWorker) ensureVolumes(ctx context.Context) {
	vols, err := setUpVolumes(ctx, w.n.objects, w.pod, filepath.Join(w.dir, "volumes"))
	if err != nil {
		if w.volumes == nil {
			w.volumeErr = err
		}
		w.warn("FailedMount", err.Error())
		w.retryAt = time.Now().Add(retryInterval)
		return
	}
	w.volumes, w.volumeErr = vols, nil
}

// terminate stops every container (SIGTERM, SIGKILL after grace), removes the sandbox and,
// for a pod deleted through the API, finishes the deletion as kubelet does.
func (w *podWorker) terminate(ctx context.Context, grace time.Duration, deleteFromAPI bool) {
	var wg sync.WaitGroup
	for _, r := range w.runs {
		if r.proc == nil {
			continue
		}
		w.event(corev1.EventTypeNormal, "Killing", fmt.Sprintf("Stopping container %s", r.name))
		wg.Add(1)
		go func(r *containerRun) {
			defer wg.Done()
			// As kubelet: when a pod is deleted, the preStop hook runs first, within the grace
			// period, while the container keeps running and its probes keep reporting. A node
			// that is going away runs no hooks.
			var slept time.Duration
			if deleteFromAPI {
				slept = w.preStop(ctx, r, grace)
			}
			if r.stopProbes != nil {
				r.stopProbes()
			}
			r.proc.stop(grace - slept)
		}(r)
	}
	wg.Wait()
	for _, r := range w.runs {
		if r.proc != nil {
			w.handleExit(processExit{container: r.name, generation: r.generation})
			r.completed = true
		}
	}
	if deleteFromAPI {
		w.updateStatus(ctx)
	}
	w.removeSandbox()
	if !deleteFromAPI {
		return
	}
	zero := int64(0)
	err := w.n.client.CoreV1().Pods(w.pod.Namespace).Delete(ctx, w.pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &w.uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.FromContext(ctx).Error(err, "finishing deletion of pod", "pod", klog.KObj(w.pod))
	}
}

func (w *podWorker) removeSandbox() {
	if w.podIP != "" && !w.pod.Spec.HostNetwork {
		if err := w.n.network.removePod(string(w.uid)); err != nil {
			klog.ErrorS(err, "removing pod network", "pod", klog.KObj(w.pod))
		}
	}
	w.n.objects.forgetPod(w.uid)
	if err := os.RemoveAll(w.dir); err != nil {
		klog.ErrorS(err, "removing pod dir", "dir", w.dir)
	}
	w.sandbox, w.podIP, w.netnsPath = false, "", ""
}

// warn records a Warning event; the recorder aggregates repeats.
func (w *podWorker) warn(reason, msg string) {
	w.event(corev1.EventTypeWarning, reason, msg)
}

func (w *podWorker) event(eventType, reason, msg string) {
	w.n.recorder.Event(w.pod, eventType, reason, msg)
}

// container is the spec of the pod's container name, nil when there is none.
func (w *podWorker) container(name string) *corev1.Container {
	for i := range w.pod.Spec.Containers {
		if w.pod.Spec.Containers[i].Name == name {
			return &w.pod.Spec.Containers[i]
		}
	}
	return nil
}

// preStop runs container r's preStop hook, as kubelet does, within the grace period, and
// returns how long it took: a sleep, or an exec run as an exec probe's command is (a command
// its image lacks fails). A failed exec is a FailedPreStopHook warning, and the container is
// stopped at once. HTTP hooks are ignored.
func (w *podWorker) preStop(ctx context.Context, r *containerRun, grace time.Duration) time.Duration {
	c := w.container(r.name)
	if c == nil || c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil || grace <= 0 {
		return preStopSleep(ctx, c, grace)
	}
	start := time.Now()
	hookCtx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	command := c.Lifecycle.PreStop.Exec.Command
	if err := execInContainer(hookCtx, "preStop hook", command, probeTarget{container: c, pid: r.proc.pid, image: r.image}); err != nil {
		w.warn("FailedPreStopHook", fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v", command, c.Name, w.pod.Namespace+"/"+w.pod.Name, err))
	}
	return time.Since(start)
}

// preStopSleep runs a container's preStop sleep action, bounded by the grace period, and
// returns how long it slept.
func preStopSleep(ctx context.Context, c *corev1.Container, grace time.Duration) time.Duration {
	if c == nil || c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		return 0
	}
	d := min(time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second, grace)
	if d <= 0 {
		return 0
	}
	t := time.NewTimer(d)
	defer t.Stop()
	start := time.Now()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return time.Since(start)
}
