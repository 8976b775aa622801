package procnode

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// memoryLimitEvery is how often the node compares each running container's memory with its
// limit. A container that grows faster than its limit in this time overshoots it until the
// next look; the kernel's OOM killer would stop it at the limit.
const memoryLimitEvery = 250 * time.Millisecond

// enforceMemoryLimits kills every running container whose memory is over its limits.memory,
// until ctx ends. Without a cgroup per container the kernel cannot do it: the node looks at
// the same sum the stats summary reports (the resident set of the container's process tree)
// every memoryLimitEvery, and kills the container's process group with SIGKILL, which ends it
// with code 137 and reason OOMKilled; the pod's restartPolicy then restarts it, as kubelet does
// after a container's OOM kill.
func (n *node) enforceMemoryLimits(ctx context.Context) {
	go wait.UntilWithContext(ctx, func(context.Context) { n.killOverLimit() }, memoryLimitEvery)
}

// killOverLimit kills each running container whose memory is over its limit, once.
func (n *node) killOverLimit() {
	type limited struct {
		pod string
		c   runningContainer
	}
	var over []limited
	for _, p := range n.runningPods() {
		for _, c := range p.containers {
			if c.memoryLimit > 0 {
				over = append(over, limited{pod: p.ref.Namespace + "/" + p.ref.Name, c: c})
			}
		}
	}
	if len(over) == 0 {
		return
	}
	table, err := readProcessTable()
	if err != nil {
		klog.V(2).InfoS("memory limits not enforced this time", "err", err)
		return
	}
	for _, l := range over {
		select {
		case <-l.c.proc.done:
			continue // exited since its worker published it; its pid may be reused
		default:
		}
		u, err := table.usage(l.c.proc.pid)
		if err != nil || u.rssBytes <= l.c.memoryLimit {
			// err: gone since the table was read
			continue
		}
		klog.InfoS("container over its memory limit: killed (OOMKilled)", "pod", l.pod, "container", l.c.name,
			"memoryBytes", u.rssBytes, "limitBytes", l.c.memoryLimit)
		l.c.proc.oomKill()
	}
}
