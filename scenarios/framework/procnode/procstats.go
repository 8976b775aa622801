package procnode

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procRoot is where the host's process table is read; a container is a host process in the
// host's PID namespace (only mount and UTS namespaces are its own), so its pids are these.
const procRoot = "/proc"

// clockTicksPerSecond is USER_HZ, the unit of the CPU times in /proc/<pid>/stat and /proc/stat.
// It is 100 on every Linux architecture Go supports (the kernel fixes it for userspace), and
// pure Go has no sysconf to ask.
const clockTicksPerSecond = 100

// processInfo is what one line of /proc/<pid>/stat tells about a process.
type processInfo struct {
	ppid int
	// cpuTicks is user+system time of the process and of its children it has waited for
	// (cutime, cstime), so a container's CPU keeps what its finished children used, as a
	// cgroup's counter does.
	cpuTicks uint64
}

// processTable is one pass over the host's processes: who is whose parent.
type processTable struct {
	procs    map[int]processInfo
	children map[int][]int
}

// readProcessTable reads /proc/<pid>/stat of every process. Processes that exit while it
// reads are left out.
func readProcessTable() (*processTable, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("listing processes in %s: %w", procRoot, err)
	}
	t := &processTable{procs: map[int]processInfo{}, children: map[int][]int{}}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		info, err := readProcessInfo(pid)
		if err != nil {
			continue // gone since the listing
		}
		t.procs[pid] = info
		t.children[info.ppid] = append(t.children[info.ppid], pid)
	}
	return t, nil
}

func readProcessInfo(pid int) (processInfo, error) {
	raw, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", procRoot, pid))
	if err != nil {
		return processInfo{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces and parentheses: the
	// fixed fields start after the last ')'.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return processInfo{}, fmt.Errorf("%s/%d/stat: no ')' after the command name", procRoot, pid)
	}
	// From field 3 on: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime …
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 15 {
		return processInfo{}, fmt.Errorf("%s/%d/stat: %d fields after the command name, want at least 15", procRoot, pid, len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return processInfo{}, fmt.Errorf("%s/%d/stat: ppid %q: %w", procRoot, pid, f[1], err)
	}
	var ticks uint64
	for _, s := range f[11:15] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return processInfo{}, fmt.Errorf("%s/%d/stat: cpu time %q: %w", procRoot, pid, s, err)
		}
		ticks += n
	}
	return processInfo{ppid: ppid, cpuTicks: ticks}, nil
}

// tree is pid and every process below it (children, grandchildren, …), pid first. A process
// that daemonised away (reparented to init or a subreaper) is no longer part of it.
func (t *processTable) tree(pid int) []int {
	if _, ok := t.procs[pid]; !ok {
		return nil
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, t.children[out[i]]...)
	}
	return out
}

// errProcessGone: the container's main process is not in the process table (it exited).
var errProcessGone = errors.New("process is gone")

// containerUsage is what the process node can say about a container's resources.
type containerUsage struct {
	// rssBytes is the resident set of the container's main process and all its descendants.
	rssBytes uint64
	// cpuNanos is their CPU time (user+system, with reaped children's), in core-nanoseconds.
	cpuNanos uint64
}

// usage sums the resident memory and CPU time of pid's process tree. Descendants that exit
// while it reads are left out; the main process missing is errProcessGone.
func (t *processTable) usage(pid int) (containerUsage, error) {
	pids := t.tree(pid)
	if len(pids) == 0 {
		return containerUsage{}, fmt.Errorf("pid %d: %w", pid, errProcessGone)
	}
	var u containerUsage
	for _, p := range pids {
		rss, err := residentBytes(p)
		if err != nil {
			if p == pid {
				return containerUsage{}, fmt.Errorf("pid %d: %w", pid, errProcessGone)
			}
			continue
		}
		u.rssBytes += rss
		u.cpuNanos += t.procs[p].cpuTicks * (1e9 / clockTicksPerSecond)
	}
	return u, nil
}

// residentBytes is the resident set size of one process: /proc/<pid>/statm's second field
// (pages, the same number as VmRSS: anonymous + file-backed + shared memory). Threads share
// their process's memory, and /proc lists only processes, so nothing is counted twice.
func residentBytes(pid int) (uint64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("%s/%d/statm", procRoot, pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(raw))
	if len(f) < 2 {
		return 0, fmt.Errorf("%s/%d/statm: %q has no resident field", procRoot, pid, raw)
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/%d/statm: resident %q: %w", procRoot, pid, f[1], err)
	}
	return pages * uint64(os.Getpagesize()), nil //nolint:gosec // G115: the page size is positive
}

// hostUsage is the node-level part of the summary.
type hostUsage struct {
	memTotal, memAvailable, memFree uint64
	cpuNanos                        uint64 // busy CPU time of all cores since boot
	bootTime                        int64  // Unix seconds
}

// readHostUsage reads /proc/meminfo and /proc/stat.
func readHostUsage() (hostUsage, error) {
	var h hostUsage
	mem, err := os.ReadFile(procRoot + "/meminfo")
	if err != nil {
		return h, fmt.Errorf("reading %s/meminfo: %w", procRoot, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(mem))
	for sc.Scan() {
		f := strings.Fields(sc.Text()) // "MemTotal:  16384 kB"
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			h.memTotal = kb * 1024
		case "MemAvailable:":
			h.memAvailable = kb * 1024
		case "MemFree:":
			h.memFree = kb * 1024
		}
	}
	stat, err := os.ReadFile(procRoot + "/stat")
	if err != nil {
		return h, fmt.Errorf("reading %s/stat: %w", procRoot, err)
	}
	sc = bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 8 && f[0] == "cpu":
			// user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
			for _, i := range []int{1, 2, 3, 6, 7, 8} {
				n, _ := strconv.ParseUint(f[i], 10, 64)
				h.cpuNanos += n * (1e9 / clockTicksPerSecond)
			}
		case len(f) == 2 && f[0] == "btime":
			h.bootTime, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	return h, nil
}
