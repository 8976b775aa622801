package contract

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// W10's memory bound: the serving container of every Ready pod, read from its node's kubelet
// (the Summary API's working set, however the provider reaches the kubelet) before the hostile
// input and every memorySampleEvery while it is sent.
const (
	// memoryHeadroom is how far a serving container's working set may rise over its level
	// before the input: room for the buffers of the ~40 connections each pod is sent at once,
	// and less than two of the 100 MB bodies held whole — what a server that reads a body
	// before it checks its size does, four at a time per route.
	memoryHeadroom = 150 << 20
	// memorySampleEvery is how often W10 reads the kubelet's figures while the input is sent.
	// A real kubelet refreshes them every 10–15 s (cAdvisor's housekeeping), the process node
	// at every read; memory a Go server took stays resident for minutes, so a peak is seen.
	memorySampleEvery = 500 * time.Millisecond
)

// memoryWatch samples the serving container's working set of each pod until stop.
type memoryWatch struct {
	container string
	mu        sync.Mutex
	baseline  map[string]uint64 // pod name → bytes before the input
	peak      map[string]uint64 // pod name → the most seen since
	failures  []string          // reads that failed while sampling, the first few
	stop      context.CancelFunc
	done      chan struct{}
}

// watchMemory reads the baseline of container in each pod, then samples until stop. A pod whose
// baseline cannot be read is an error: the bound could not be checked.
func watchMemory(ctx context.Context, c *suite.Cluster, pods []corev1.Pod, container string) (*memoryWatch, error) {
	w := &memoryWatch{container: container, baseline: map[string]uint64{}, peak: map[string]uint64{}, done: make(chan struct{})}
	for i := range pods {
		n, err := containerMemory(ctx, c, &pods[i], container)
		if err != nil {
			return nil, fmt.Errorf("before the hostile input: %w", err)
		}
		w.baseline[pods[i].Name], w.peak[pods[i].Name] = n, n
	}
	ctx, w.stop = context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		tick := time.NewTicker(memorySampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for i := range pods {
				w.sample(ctx, c, &pods[i])
			}
		}
	}()
	return w, nil
}

func (w *memoryWatch) sample(ctx context.Context, c *suite.Cluster, pod *corev1.Pod) {
	n, err := containerMemory(ctx, c, pod, w.container)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil && ctx.Err() == nil && len(w.failures) < 3:
		w.failures = append(w.failures, err.Error())
	case err == nil:
		w.peak[pod.Name] = max(w.peak[pod.Name], n)
	}
}

// finish stops sampling and reads each pod once more.
func (w *memoryWatch) finish(ctx context.Context, c *suite.Cluster, pods []corev1.Pod) {
	w.stop()
	<-w.done
	for i := range pods {
		w.sample(ctx, c, &pods[i])
	}
}

// containerMemory is the working set of one container of pod.
func containerMemory(ctx context.Context, c *suite.Cluster, pod *corev1.Pod, container string) (uint64, error) {
	byContainer, err := c.PodMemory(ctx, pod)
	if err != nil {
		return 0, err
	}
	n, ok := byContainer[container]
	if !ok {
		return 0, fmt.Errorf("the kubelet reports no memory for container %s of pod %s/%s (it reports %d containers)", container, pod.Namespace, pod.Name, len(byContainer))
	}
	return n, nil
}

// MiB per pod, before and at most: what the report notes.
func (w *memoryWatch) report() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]string{}
	for pod, base := range w.baseline {
		out[pod] = fmt.Sprintf("%d MiB before, %d MiB at most", base>>20, w.peak[pod]>>20)
	}
	return out
}

// overBound lists the pods whose container rose more than memoryHeadroom over its baseline.
func (w *memoryWatch) overBound() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var over []string
	for pod, base := range w.baseline {
		if peak := w.peak[pod]; peak > base+memoryHeadroom {
			over = append(over, fmt.Sprintf("pod %s: container %s %d MiB before the input, %d MiB at most while it was sent (+%d MiB)", pod, w.container, base>>20, peak>>20, (peak-base)>>20))
		}
	}
	sort.Strings(over)
	return over
}
