package procnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// runningPod is a pod's running containers, as published by its worker for the stats API.
type runningPod struct {
	ref        statsv1alpha1.PodReference
	startTime  metav1.Time
	containers []runningContainer
}

type runningContainer struct {
	name string
	proc *containerProcess
}

// publishRunning records which of the pod's containers have a process now (init containers,
// sidecars included, first, in spec order, as the pod lists them).
func (w *podWorker) publishRunning() {
	var rp *runningPod
	if w.pod != nil {
		rp = &runningPod{
			ref:       statsv1alpha1.PodReference{Name: w.pod.Name, Namespace: w.pod.Namespace, UID: string(w.uid)},
			startTime: w.startTime,
		}
		for _, list := range [][]corev1.Container{w.pod.Spec.InitContainers, w.pod.Spec.Containers} {
			for _, c := range list {
				if r := w.runs[c.Name]; r != nil && r.proc != nil {
					rp.containers = append(rp.containers, runningContainer{name: c.Name, proc: r.proc})
				}
			}
		}
	}
	w.mu.Lock()
	w.running = rp
	w.mu.Unlock()
}

// runningPods lists the published state of every pod on the node, by namespace and name.
func (n *node) runningPods() []runningPod {
	n.mu.Lock()
	workers := make([]*podWorker, 0, len(n.workers))
	for _, w := range n.workers {
		workers = append(workers, w)
	}
	n.mu.Unlock()
	var pods []runningPod
	for _, w := range workers {
		w.mu.Lock()
		if w.running != nil {
			pods = append(pods, *w.running)
		}
		w.mu.Unlock()
	}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].ref.Namespace != pods[j].ref.Namespace {
			return pods[i].ref.Namespace < pods[j].ref.Namespace
		}
		return pods[i].ref.Name < pods[j].ref.Name
	})
	return pods
}

// serveStatsSummary implements GET /stats/summary, kubelet's Summary API, from /proc: see
// statsSummary and CONTRACT.md for what it fills in.
func (n *node) serveStatsSummary(w http.ResponseWriter, _ *http.Request) {
	summary, err := n.statsSummary()
	if err != nil {
		klog.ErrorS(err, "building the stats summary")
		http.Error(w, fmt.Sprintf("building the stats summary of node %s: %v", n.cfg.NodeName, err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(summary); err != nil {
		klog.V(2).InfoS("writing the stats summary", "err", err)
	}
}

// statsSummary is the node's Summary. A container's memory is the resident set (RSS) of its
// main process and all that process's descendants; a process node has no cgroup per
// container, so there is no page cache or kernel memory to tell apart, and workingSetBytes,
// rssBytes and usageBytes are all that one sum. Its CPU is their user+system time. A
// container with no process (waiting, backing off, finished) is left out, as is a pod with
// no running container; what is listed has memory and CPU.
func (n *node) statsSummary() (*statsv1alpha1.Summary, error) {
	table, err := readProcessTable()
	if err != nil {
		return nil, err
	}
	now := metav1.Now()
	summary := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: n.cfg.NodeName}}
	if host, err := readHostUsage(); err != nil {
		klog.V(2).InfoS("node-level stats left out", "err", err)
	} else {
		summary.Node.StartTime = metav1.NewTime(time.Unix(host.bootTime, 0))
		summary.Node.CPU = cpuStats(now, host.cpuNanos)
		summary.Node.Memory = &statsv1alpha1.MemoryStats{
			Time:            now,
			AvailableBytes:  ptr.To(host.memAvailable),
			UsageBytes:      ptr.To(host.memTotal - host.memFree),
			WorkingSetBytes: ptr.To(host.memTotal - host.memAvailable),
		}
	}
	for _, p := range n.runningPods() {
		ps := statsv1alpha1.PodStats{PodRef: p.ref, StartTime: p.startTime, Containers: []statsv1alpha1.ContainerStats{}}
		var total containerUsage
		for _, c := range p.containers {
			select {
			case <-c.proc.done:
				continue // exited since the worker published it; its pid may be reused
			default:
			}
			u, err := table.usage(c.proc.pid)
			if errors.Is(err, errProcessGone) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("container %s of pod %s/%s: %w", c.name, p.ref.Namespace, p.ref.Name, err)
			}
			total.rssBytes += u.rssBytes
			total.cpuNanos += u.cpuNanos
			ps.Containers = append(ps.Containers, statsv1alpha1.ContainerStats{
				Name:      c.name,
				StartTime: metav1.NewTime(c.proc.started).Rfc3339Copy(),
				CPU:       cpuStats(now, u.cpuNanos),
				Memory:    memoryStats(now, u.rssBytes),
			})
		}
		if len(ps.Containers) == 0 {
			continue
		}
		ps.CPU, ps.Memory = cpuStats(now, total.cpuNanos), memoryStats(now, total.rssBytes)
		summary.Pods = append(summary.Pods, ps)
	}
	return summary, nil
}

// memoryStats reports one RSS sum as usage, working set and RSS alike (see statsSummary).
func memoryStats(now metav1.Time, rss uint64) *statsv1alpha1.MemoryStats {
	return &statsv1alpha1.MemoryStats{Time: now, UsageBytes: ptr.To(rss), WorkingSetBytes: ptr.To(rss), RSSBytes: ptr.To(rss)}
}

// cpuStats reports cumulative CPU time only: usageNanoCores is a rate kubelet derives from
// samples over time, which a stateless reading of /proc cannot give.
func cpuStats(now metav1.Time, nanos uint64) *statsv1alpha1.CPUStats {
	return &statsv1alpha1.CPUStats{Time: now, UsageCoreNanoSeconds: ptr.To(nanos)}
}
