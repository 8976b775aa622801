package suiterun

import (
	"errors"
	"fmt"
	"math"
)

// Needs is what one running suite takes from the machine. The figures are estimates from what a
// suite runs, rounded up, until measured (docs/make.md says how):
//   - local: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the process node,
//     up to six operator processes, cert-manager, the test binary, and — as every suite starts —
//     go test's link of the test binary; inotify: kube-apiserver's watched certificate files
//     and each operator's certwatcher;
//   - kind: a node container (systemd, containerd, kubelet, the control plane, kube-proxy,
//     CoreDNS) besides the test binary; inotify: systemd, containerd, kubelet and cAdvisor
//     watch files and cgroups, which kind's own known issues ask 512 instances for many nodes.
type Needs struct {
	Memory           float64 // bytes
	FileHandles      float64 // of the system's table (fs.file-max)
	InotifyInstances float64 // of this user's (fs.inotify.max_user_instances)
	InotifyWatches   float64 // of this user's (fs.inotify.max_user_watches)
}

const gib = 1 << 30

// NeedsOf are the needs of one suite per provider; existing creates no cluster.
var NeedsOf = map[string]Needs{
	"local":    {Memory: 1.5 * gib, FileHandles: 2048, InotifyInstances: 16, InotifyWatches: 512},
	"kind":     {Memory: 3 * gib, FileHandles: 8192, InotifyInstances: 40, InotifyWatches: 8192},
	"existing": {Memory: 0.5 * gib, FileHandles: 256},
}

// MinOpenFilesPerProcess is the open-file limit (RLIMIT_NOFILE) a suite's busiest process
// (kube-apiserver, or the operator under H5's slow clients) may need; Go programs raise their
// own soft limit to the hard one, so the hard limit is what counts. It is per process: more
// suites at once need no more of it.
const MinOpenFilesPerProcess = 4096

// Pool is a machine resource suites draw from: how much of it is free, how that was read (for
// messages: "MemAvailable in /proc/meminfo is 3.1 GiB"), and how to get more.
type Pool struct {
	Free   float64
	Source string
	More   string
}

// Readings are the machine's figures the check compares the suites' needs with.
type Readings struct {
	Cores                                                 int
	Memory, FileHandles, InotifyInstances, InotifyWatches Pool
	// OpenFilesPerProcess is the hard RLIMIT_NOFILE.
	OpenFilesPerProcess uint64
}

// demand is a suite's need of one pool.
type demand struct {
	what string // after the amount: "64 inotify instances", "6.0 GiB of free memory"
	pool Pool
	need float64
	unit func(float64) string
}

// demands pairs each pool with a suite's need of it.
func (r Readings) demands(n Needs) []demand {
	number := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	bytes := func(v float64) string { return fmt.Sprintf("%.1f GiB", v/gib) }
	return []demand{
		{"of free memory", r.Memory, n.Memory, bytes},
		{"open files (the system's file table)", r.FileHandles, n.FileHandles, number},
		{"inotify instances", r.InotifyInstances, n.InotifyInstances, number},
		{"inotify watches", r.InotifyWatches, n.InotifyWatches, number},
	}
}

// DefaultJobs is how many suites run at once when E2E_JOBS is not given: for local, one more
// than there are cores — a local suite mostly waits (on Leases, certificates, rollouts), so
// the CPU has room for a third suite on 2 cores, and more would turn waits into contention
// that the timing scenarios (P5's takeover times, H4's latency) feel; for kind, one per two
// cores — each cluster keeps a kubelet, containerd and a whole control plane busy even when
// idle; existing, one (every suite shares its one cluster). Never more than the suites, nor
// than the machine has memory, open files and inotify room for.
func DefaultJobs(provider string, r Readings, suites int) int {
	var jobs int
	switch provider {
	case "local":
		jobs = r.Cores + 1
	case "kind":
		jobs = r.Cores / 2
	default:
		jobs = 1
	}
	if need, ok := NeedsOf[provider]; ok {
		jobs = min(jobs, fitting(r, need))
	}
	return max(1, min(jobs, suites))
}

// CheckCapacity says what keeps the machine from running jobs suites of provider at once: one
// sentence per limit, naming it, what it is, and what to lower (E2E_JOBS) or raise.
func CheckCapacity(provider string, jobs int, r Readings) error {
	need, ok := NeedsOf[provider]
	if !ok {
		return nil // the suite names the providers it knows
	}
	var errs []error
	fits := fitting(r, need)
	for _, d := range r.demands(need) {
		total := float64(jobs) * d.need
		if total <= d.pool.Free {
			continue
		}
		fix := d.pool.More
		if fits >= 1 {
			fix = fmt.Sprintf("lower E2E_JOBS to %d, or %s", fits, d.pool.More)
		}
		errs = append(errs, fmt.Errorf("E2E_JOBS=%d needs %s %s (%s per %s suite), and %s: %s",
			jobs, d.unit(total), d.what, d.unit(d.need), provider, d.pool.Source, fix))
	}
	if r.OpenFilesPerProcess < MinOpenFilesPerProcess {
		errs = append(errs, fmt.Errorf("the open-file limit (RLIMIT_NOFILE, `ulimit -Hn`) is %d, and a suite's busiest process may need %d: raise it (`ulimit -n %d` in a shell allowed to, or nofile in /etc/security/limits.conf); E2E_JOBS does not change it",
			r.OpenFilesPerProcess, MinOpenFilesPerProcess, MinOpenFilesPerProcess))
	}
	return errors.Join(errs...)
}

// fitting is how many suites with need fit in what r has free.
func fitting(r Readings, need Needs) int {
	fits := math.MaxInt
	for _, p := range r.demands(need) {
		if p.need > 0 {
			fits = min(fits, int(math.Floor(p.pool.Free/p.need)))
		}
	}
	return fits
}
