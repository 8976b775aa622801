package suite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// PodLogsDir, below a suite's cluster artifacts (ArtifactsDir(…, ClusterArtifacts)), holds the
// log of every run of every container of the pods a suite watches, recorded as it is written:
// <ns>_<pod>_<container>_<restart count>.log. A kubelet deletes a pod's logs with the pod, so
// without it a rollout's replaced pods (their drain, their last words) leave nothing behind.
const PodLogsDir = "pod-logs"

// podLogRecorder follows the log of each container run of the pods it is interested in, from
// the moment the run shows as started until the container ends, into one file per run.
type podLogRecorder struct {
	kube       kubernetes.Interface
	dir        string
	interested func(*corev1.Pod) bool
	logf       func(string, ...any)

	mu        sync.Mutex
	following map[string]bool // <ns>_<pod>_<container>_<restart count>
	wg        sync.WaitGroup
}

// podLogStopTimeout bounds how long stopping waits for the logs still being copied.
const podLogStopTimeout = 10 * time.Second

// recordPodLogs starts recording the logs of the pods interested picks into dir; the returned
// stop ends the recording and waits (a bounded time) for what is still being copied.
func recordPodLogs(kube kubernetes.Interface, dir string, interested func(*corev1.Pod) bool, logf func(string, ...any)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &podLogRecorder{kube: kube, dir: dir, interested: interested, logf: logf, following: map[string]bool{}}
	factory := informers.NewSharedInformerFactory(kube, 0)
	pods := factory.Core().V1().Pods().Informer()
	seen := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && r.interested(p) {
			r.follow(ctx, p)
		}
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
	}); err != nil {
		logf("recording pod logs: %v", err)
		cancel()
		return func() {}
	}
	factory.Start(ctx.Done())
	return func() {
		cancel()
		factory.Shutdown()
		done := make(chan struct{})
		go func() { r.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(podLogStopTimeout):
			logf("recording pod logs: copies still running after %s, left behind", podLogStopTimeout)
		}
	}
}

// follow starts copying every container run of p that has started and is not followed yet.
func (r *podLogRecorder) follow(ctx context.Context, p *corev1.Pod) {
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if cs.State.Running == nil && cs.State.Terminated == nil {
			continue
		}
		name := fmt.Sprintf("%s_%s_%s_%d", p.Namespace, p.Name, cs.Name, cs.RestartCount)
		r.mu.Lock()
		already := r.following[name]
		r.following[name] = true
		r.mu.Unlock()
		if already {
			continue
		}
		r.wg.Add(1)
		go func(container string) {
			defer r.wg.Done()
			// Followed until the container ends; a run that has already ended is copied as the
			// kubelet still has it. An error once the recording stops is the stop's own.
			opts := &corev1.PodLogOptions{Container: container, Follow: true}
			if err := saveLog(ctx, r.kube, p.Namespace, p.Name, opts, filepath.Join(r.dir, name+".log")); err != nil && ctx.Err() == nil {
				r.logf("recording pod logs: %v", err)
			}
		}(cs.Name)
	}
}

// logsWorthRecording picks the pods whose logs explain a suite's failures: the operator's and
// cert-manager's (logSelector), and every pod in the namespace of the target under test.
func logsWorthRecording(targetNamespace string) func(*corev1.Pod) bool {
	selector, err := labels.Parse(logSelector)
	if err != nil {
		panic(fmt.Sprintf("logSelector %q: %v", logSelector, err))
	}
	return func(p *corev1.Pod) bool {
		return (targetNamespace != "" && p.Namespace == targetNamespace) || selector.Matches(labels.Set(p.Labels))
	}
}
