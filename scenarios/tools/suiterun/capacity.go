package suiterun

import (
	"errors"
	"fmt"
	"math"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

const gib = cluster.GiB

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
func (r Readings) demands(n cluster.Footprint) []demand {
	number := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	bytes := func(v float64) string { return fmt.Sprintf("%.1f GiB", v/gib) }
	return []demand{
		{"of free memory", r.Memory, n.Memory, bytes},
		{"open files (the system's file table)", r.FileHandles, n.FileHandles, number},
		{"inotify instances", r.InotifyInstances, n.InotifyInstances, number},
		{"inotify watches", r.InotifyWatches, n.InotifyWatches, number},
	}
}

// DefaultJobs is how many suites of a provider with footprint f run at once when E2E_JOBS is
// not given: as many as f says the host's cores allow, never more than the suites, nor than
// the machine has memory, open files and inotify room for, and at least one.
func DefaultJobs(f cluster.Footprint, r Readings, suites int) int {
	jobs := 1
	if f.SuitesAtOnce != nil && !f.SharedCluster {
		jobs = min(f.SuitesAtOnce(r.Cores), fitting(r, f))
	}
	return max(1, min(jobs, suites))
}

// CheckCapacity says what keeps the machine from running jobs suites of provider, whose
// footprint is need, at once: one sentence per limit, naming it, what it is, and what to lower
// (knob, the setting that gave jobs: E2E_JOBS, MATRIX_JOBS) or raise.
func CheckCapacity(knob string, jobs int, provider string, need cluster.Footprint, r Readings) error {
	var errs []error
	fits := fitting(r, need)
	for _, d := range r.demands(need) {
		total := float64(jobs) * d.need
		if total <= d.pool.Free {
			continue
		}
		fix := d.pool.More
		if fits >= 1 {
			fix = fmt.Sprintf("lower %s to %d, or %s", knob, fits, d.pool.More)
		}
		errs = append(errs, fmt.Errorf("%s=%d needs %s %s (%s per %s suite), and %s: %s",
			knob, jobs, d.unit(total), d.what, d.unit(d.need), provider, d.pool.Source, fix))
	}
	if r.OpenFilesPerProcess < MinOpenFilesPerProcess {
		errs = append(errs, fmt.Errorf("the open-file limit (RLIMIT_NOFILE, `ulimit -Hn`) is %d, and a suite's busiest process may need %d: raise it (`ulimit -n %d` in a shell allowed to, or nofile in /etc/security/limits.conf); %s does not change it",
			r.OpenFilesPerProcess, MinOpenFilesPerProcess, MinOpenFilesPerProcess, knob))
	}
	return errors.Join(errs...)
}

// fitting is how many suites with need fit in what r has free.
func fitting(r Readings, need cluster.Footprint) int {
	fits := math.MaxInt
	for _, p := range r.demands(need) {
		if p.need > 0 {
			fits = min(fits, int(math.Floor(p.pool.Free/p.need)))
		}
	}
	return fits
}
