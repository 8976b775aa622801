package procnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// containerRun is the lifetime of one container across its restarts.
type containerRun struct {
	name         string
	init         bool
	sidecar      bool
	spec         *corev1.Container
	proc         *containerProcess
	generation   int
	restartCount int32
	everStarted  bool
	// completed: the container exited and will not be restarted.
	completed   bool
	nextStart   time.Time
	waiting     *corev1.ContainerStateWaiting
	lastTerm    *corev1.ContainerStateTerminated
	prevTerm    *corev1.ContainerStateTerminated
	ready       bool
	started     bool
	startedOnce bool
	startedGate chan struct{}
	stopProbes  context.CancelFunc
	held        [][]string
	exitedAt    time.Time // when the last run ended: the start of its restart back-off
	binary      string
	image       Image // what the image of the running process holds, for its exec hooks
}

// processExit and the probeResult type are what arrives in a worker's inbox.
type processExit struct {
	container  string
	generation int
}

type killRequest struct {
	container  string
	generation int
	reason     string
}

// runInitContainers runs init containers in order; it reports whether all are done
// (sidecars count as done once started).
func (w *podWorker) runInitContainers(ctx context.Context) bool {
	for i := range w.pod.Spec.InitContainers {
		c := &w.pod.Spec.InitContainers[i]
		r := w.containerRun(c, true)
		if r.sidecar {
			w.maybeStart(ctx, r)
			if !r.startedOnce {
				return false
			}
			continue
		}
		if r.completed && r.lastTerm != nil && r.lastTerm.ExitCode == 0 {
			continue
		}
		w.maybeStart(ctx, r)
		return false
	}
	return true
}

func (w *podWorker) runContainers(ctx context.Context) {
	for i := range w.pod.Spec.Containers {
		w.maybeStart(ctx, w.containerRun(&w.pod.Spec.Containers[i], false))
	}
}

func (w *podWorker) containerRun(c *corev1.Container, init bool) *containerRun {
	r, ok := w.runs[c.Name]
	if !ok {
		r = &containerRun{
			name:    c.Name,
			init:    init,
			sidecar: init && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways,
			spec:    c,
			waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"},
		}
		if init {
			r.waiting.Reason = "PodInitializing"
		}
		w.runs[c.Name] = r
	}
	return r
}

// maybeStart starts the container if it is not running, not finished and not backing off.
func (w *podWorker) maybeStart(ctx context.Context, r *containerRun) {
	if r.proc != nil || r.completed {
		return
	}
	if !r.nextStart.IsZero() && time.Now().Before(r.nextStart) {
		return
	}
	if err := w.startContainer(ctx, r); err != nil {
		klog.FromContext(ctx).V(1).Info("container not started", "pod", klog.KObj(w.pod), "container", r.name, "err", err)
	}
}

func (w *podWorker) startContainer(ctx context.Context, r *containerRun) error {
	c := r.spec
	img, err := w.n.images.resolve(c.Image)
	if err != nil {
		var notMapped *errImageNotMapped
		reason := "ImageNotMapped"
		if !errors.As(err, &notMapped) {
			reason = "ErrImageBinary"
		}
		r.waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()}
		w.warn("Failed", fmt.Sprintf("Error: %s", err))
		r.nextStart = time.Now().Add(retryInterval)
		return err
	}
	if r.binary != img.Binary {
		w.event(corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q mapped to binary %s", c.Image, img.Binary))
		r.binary = img.Binary
	}
	env, err := containerEnv(ctx, w.n.objects, w.podWithIP(), c, img.Env, w.n.api, w.n.cfg.CoverDir)
	if err != nil {
		r.waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}
		w.warn("Failed", fmt.Sprintf("Error: %s", err))
		r.nextStart = time.Now().Add(retryInterval)
		return err
	}
	// A command naming a program the image does not hold fails as the runtime's exec does:
	// a start error, after the container was created.
	binary, programErr := img.program(c.Command)
	spec, held, err := w.initSpecFor(c, img, binary, env)
	if err != nil {
		r.waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: err.Error()}
		w.warn("Failed", fmt.Sprintf("Error: %s", err))
		r.nextStart = time.Now().Add(retryInterval)
		return err
	}
	if r.everStarted {
		w.countRestart(r)
	}
	logPath := w.n.logPath(w.pod, c.Name, r.restartCount)
	w.event(corev1.EventTypeNormal, "Created", fmt.Sprintf("Created container %s", c.Name))
	var proc *containerProcess
	err = programErr
	if err == nil {
		proc, err = startProcess(w.n.cfg.Executable, spec, w.n.isolate, logPath)
	}
	r.everStarted = true
	if err != nil {
		w.n.mounts.releaseAll(held)
		now := metav1.Now().Rfc3339Copy()
		r.prevTerm, r.lastTerm = r.lastTerm, &corev1.ContainerStateTerminated{
			ExitCode: 128, Reason: "StartError", Message: err.Error(), StartedAt: now, FinishedAt: now,
		}
		w.warn("Failed", fmt.Sprintf("Error: failed to start container %q: %v", c.Name, err))
		w.scheduleRestart(r, time.Now())
		return err
	}
	r.proc, r.held, r.waiting, r.image = proc, held, nil, img
	r.generation++
	r.ready, r.started = false, false
	w.event(corev1.EventTypeNormal, "Started", fmt.Sprintf("Started container %s", c.Name))
	w.startProbes(r, img)
	gen := r.generation
	go func() {
		<-proc.done
		w.post(processExit{container: r.name, generation: gen})
	}()
	return nil
}

// podWithIP is the pod as the downward API must see it (status.podIP known before the
// status is written back).
func (w *podWorker) podWithIP() *corev1.Pod {
	p := w.pod.DeepCopy()
	p.Status.PodIP = w.podIP
	p.Status.PodIPs = []corev1.PodIP{{IP: w.podIP}}
	p.Status.HostIP = w.n.nodeIP
	p.Status.HostIPs = []corev1.HostIP{{IP: w.n.nodeIP}}
	return p
}

// initSpecFor turns the container into what its init needs: mounts (the files its image
// carries, then its volumes over them, targets created on the host when missing), hostname,
// network namespace, argv and environment.
func (w *podWorker) initSpecFor(c *corev1.Container, img Image, binary string, env []string) (*initSpec, [][]string, error) {
	spec := &initSpec{
		Binary:     binary,
		Argv:       containerArgv(binary, c, env),
		Env:        env,
		WorkingDir: c.WorkingDir,
	}
	if spec.WorkingDir == "" {
		// An image without WORKDIR starts in "/"; never leave the daemon's cwd to a pod.
		spec.WorkingDir = "/"
	}
	if !w.n.isolate {
		// Without mount namespaces the volumes stay where they are; say where. The files an
		// image carries are not at their paths (the node's start-up warning says so).
		for name, dir := range w.volumes {
			spec.Env = append(spec.Env, "GAUNTLET_VOLUME_"+envName(name)+"="+dir)
		}
		return spec, nil, nil
	}
	spec.Netns = w.netnsPath
	if w.netnsPath != "" {
		spec.DetachDir = filepath.Dir(w.netnsPath)
	}
	if !w.pod.Spec.HostNetwork {
		spec.Hostname = w.pod.Name
	}
	var held [][]string
	fail := func(err error) (*initSpec, [][]string, error) {
		w.n.mounts.releaseAll(held)
		return nil, nil, err
	}
	mount := func(src, target string, readOnly bool) error {
		info, err := os.Stat(src)
		if err != nil {
			return err
		}
		h, err := w.n.mounts.ensure(target, !info.IsDir())
		if err != nil {
			return err
		}
		held = append(held, h)
		spec.Mounts = append(spec.Mounts, initMount{Source: src, Target: target, ReadOnly: readOnly})
		return nil
	}
	for _, p := range sortedKeys(img.Files) {
		if err := mount(img.Files[p], p, true); err != nil {
			return fail(fmt.Errorf("file %s of image %q: %w", p, c.Image, err))
		}
	}
	targets := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		src, ok := w.volumes[vm.Name]
		if !ok {
			return fail(fmt.Errorf("volumeMount %q of container %q names no volume of the pod", vm.Name, c.Name))
		}
		if vm.SubPath != "" {
			src = filepath.Join(src, vm.SubPath)
		}
		if err := mount(src, vm.MountPath, vm.ReadOnly || w.alwaysReadOnly(vm.Name)); err != nil {
			return fail(fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, c.Name, err))
		}
		targets[filepath.Clean(vm.MountPath)] = true
	}
	if w.netnsPath != "" {
		for _, f := range []string{"hosts", "resolv.conf"} {
			target := "/etc/" + f
			if _, err := os.Stat(target); err != nil || targets[target] {
				continue
			}
			spec.Mounts = append(spec.Mounts, initMount{Source: filepath.Join(w.dir, f), Target: target, ReadOnly: true})
		}
	}
	if c.WorkingDir != "" {
		h, err := w.n.mounts.ensure(c.WorkingDir, false)
		if err != nil {
			return fail(err)
		}
		held = append(held, h)
	}
	return spec, held, nil
}

// alwaysReadOnly mirrors kubelet, which mounts API-sourced volumes read-only.
func (w *podWorker) alwaysReadOnly(volume string) bool {
	for _, v := range w.pod.Spec.Volumes {
		if v.Name == volume {
			return v.Secret != nil || v.ConfigMap != nil || v.Projected != nil || v.DownwardAPI != nil
		}
	}
	return false
}

func (w *podWorker) startProbes(r *containerRun, img Image) {
	ctx, cancel := context.WithCancel(context.Background())
	r.stopProbes = cancel
	t := probeTarget{podIP: w.podIP, container: r.spec, pid: r.proc.pid, image: img}
	report := func(res probeResult) { w.post(res) }
	var gate chan struct{}
	if p := r.spec.StartupProbe; p != nil {
		gate = make(chan struct{})
		r.startedGate = gate
		go runProbeLoop(ctx, startupProbe, p, t, r.generation, nil, report)
	} else {
		r.started, r.startedOnce = true, true
	}
	if p := r.spec.ReadinessProbe; p != nil {
		go runProbeLoop(ctx, readinessProbe, p, t, r.generation, gate, report)
	} else {
		r.ready = true
	}
	if p := r.spec.LivenessProbe; p != nil {
		go runProbeLoop(ctx, livenessProbe, p, t, r.generation, gate, report)
	}
}

func (w *podWorker) handleInbox(inbox []any) {
	for _, msg := range inbox {
		switch m := msg.(type) {
		case processExit:
			w.handleExit(m)
		case probeResult:
			w.handleProbe(m)
		case killRequest:
			r := w.runs[m.container]
			if r != nil && r.proc != nil && r.generation == m.generation {
				w.event(corev1.EventTypeNormal, "Killing", fmt.Sprintf("Container %s %s, will be restarted", r.name, m.reason))
				proc, grace := r.proc, w.gracePeriod(0)
				go proc.stop(grace)
			}
		}
	}
}

func (w *podWorker) handleExit(m processExit) {
	r := w.runs[m.container]
	if r == nil || r.proc == nil || r.generation != m.generation {
		return
	}
	code, reason, finished := r.proc.exited()
	r.prevTerm = r.lastTerm
	r.lastTerm = &corev1.ContainerStateTerminated{
		ExitCode:    code,
		Reason:      reason,
		StartedAt:   metav1.NewTime(r.proc.started).Rfc3339Copy(),
		FinishedAt:  metav1.NewTime(finished).Rfc3339Copy(),
		ContainerID: containerID(r.proc),
	}
	if r.stopProbes != nil {
		r.stopProbes()
	}
	w.n.mounts.releaseAll(r.held)
	r.proc, r.held, r.ready, r.started = nil, nil, false, false
	if w.pod.DeletionTimestamp != nil {
		return
	}
	policy := w.pod.Spec.RestartPolicy
	switch {
	case r.sidecar:
		policy = corev1.RestartPolicyAlways
	case r.init && policy == corev1.RestartPolicyAlways:
		// As kubelet: an init container runs to completion; a pod's Always restarts it on failure.
		policy = corev1.RestartPolicyOnFailure
	}
	if policy == corev1.RestartPolicyAlways || (policy == corev1.RestartPolicyOnFailure && code != 0) {
		w.scheduleRestart(r, finished)
		return
	}
	r.completed = true
}

// scheduleRestart sets when a container that exited at finished starts again, with kubelet's
// restart back-off (w.backoff, keyed by container name, used as kubelet uses it): a container
// that exits inside its back-off window waits it out; the first exit has none, and one that
// ran for more than twice the longest window starts over.
func (w *podWorker) scheduleRestart(r *containerRun, finished time.Time) {
	r.exitedAt = finished
	var delay time.Duration
	if w.backoff.IsInBackOffSince(r.name, finished) {
		delay = w.backoff.Get(r.name)
	}
	r.nextStart = finished.Add(delay)
	if delay <= 0 {
		return
	}
	msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, r.name, w.pod.Name, w.pod.Namespace, w.pod.UID)
	r.waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: msg}
	w.warn("BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s_%s(%s)", r.name, w.pod.Name, w.pod.Namespace, w.pod.UID))
}

// countRestart records that r starts again after an exit; its back-off window doubles (up
// to the maximum) or, after a long run, starts over at the initial one.
func (w *podWorker) countRestart(r *containerRun) {
	r.restartCount++
	w.backoff.Next(r.name, r.exitedAt)
}

func (w *podWorker) handleProbe(m probeResult) {
	r := w.runs[m.container]
	if r == nil || r.proc == nil || r.generation != m.generation {
		return
	}
	if m.message != "" {
		w.warn("Unhealthy", m.message)
	}
	switch m.kind {
	case readinessProbe:
		r.ready = m.healthy
	case startupProbe:
		if m.healthy && !r.started {
			r.started, r.startedOnce = true, true
			close(r.startedGate)
			if r.spec.ReadinessProbe == nil {
				r.ready = true
			}
		}
		if m.exhausted && !r.started {
			w.post(killRequest{container: r.name, generation: r.generation, reason: "failed startup probe"})
		}
	case livenessProbe:
		if !m.healthy {
			w.post(killRequest{container: r.name, generation: r.generation, reason: "failed liveness probe"})
		}
	}
}

func containerID(p *containerProcess) string {
	return fmt.Sprintf("process://%d", p.pid)
}

// envName turns a volume name into an environment variable suffix.
func envName(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}
