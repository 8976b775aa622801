package suiterun

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// ReadMachine reads the figures CheckCapacity and DefaultJobs need from /proc and the process's
// limits.
func ReadMachine() (Readings, error) {
	r := Readings{Cores: runtime.NumCPU()}
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return r, err
	}
	avail, err := memAvailable(string(meminfo))
	if err != nil {
		return r, err
	}
	r.Memory = Pool{Free: avail, Source: fmt.Sprintf("MemAvailable in /proc/meminfo is %.1f GiB", avail/gib),
		More: "free memory (stop what else runs)"}

	fileNr, err := os.ReadFile("/proc/sys/fs/file-nr")
	if err != nil {
		return r, err
	}
	f := strings.Fields(string(fileNr)) // allocated, free among them (always 0 since Linux 2.6), max
	if len(f) != 3 {
		return r, fmt.Errorf("/proc/sys/fs/file-nr: want 3 fields, have %q", fileNr)
	}
	allocated, err1 := strconv.ParseFloat(f[0], 64)
	limit, err2 := strconv.ParseFloat(f[2], 64)
	if err1 != nil || err2 != nil {
		return r, fmt.Errorf("/proc/sys/fs/file-nr: %q", fileNr)
	}
	r.FileHandles = Pool{Free: limit - allocated, Source: fmt.Sprintf("the system's file table (fs.file-max) is %.0f, %.0f in use", limit, allocated),
		More: "raise it: sysctl -w fs.file-max=<more>"}

	instances, watches := inotifyInUse(os.Getuid())
	for _, in := range []struct {
		pool      *Pool
		setting   string
		inUse     int
		suggested int
	}{
		{&r.InotifyInstances, "max_user_instances", instances, 512},
		{&r.InotifyWatches, "max_user_watches", watches, 524288},
	} {
		raw, err := os.ReadFile("/proc/sys/fs/inotify/" + in.setting)
		if err != nil {
			return r, err
		}
		limit, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			return r, fmt.Errorf("/proc/sys/fs/inotify/%s: %w", in.setting, err)
		}
		*in.pool = Pool{Free: float64(limit - in.inUse),
			Source: fmt.Sprintf("fs.inotify.%s is %d, %d in use by this user's processes", in.setting, limit, in.inUse),
			More:   fmt.Sprintf("raise it: sysctl -w fs.inotify.%s=%d", in.setting, max(in.suggested, 2*limit))}
	}

	var nofile syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		return r, fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	r.OpenFilesPerProcess = nofile.Max
	return r, nil
}

// memAvailable is MemAvailable of /proc/meminfo, in bytes.
func memAvailable(meminfo string) (float64, error) {
	sc := bufio.NewScanner(strings.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "MemAvailable:" && f[2] == "kB" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo: %q: %w", sc.Text(), err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/meminfo has no MemAvailable line in kB")
}

// inotifyInUse counts the inotify instances and watches the processes of uid hold: the kernel
// limits them per user and shows them only per process, as anon_inode:inotify descriptors
// whose fdinfo has one "inotify wd:" line per watch. Processes that end or cannot be read
// while it counts are skipped.
func inotifyInUse(uid int) (instances, watches int) {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		if processUID(p) != uid {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join(p, "fd"))
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join(p, "fd", fd.Name())); err != nil || target != "anon_inode:inotify" {
				continue
			}
			instances++
			info, _ := os.ReadFile(filepath.Join(p, "fdinfo", fd.Name())) //nolint:gosec // G304: a process's descriptor info under /proc
			watches += strings.Count(string(info), "inotify wd:")
		}
	}
	return instances, watches
}

// processUID is the real user ID of the process whose /proc directory is dir, -1 if unknown.
func processUID(dir string) int {
	status, err := os.ReadFile(filepath.Join(dir, "status")) //nolint:gosec // G304: a process's status under /proc
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if uid, err := strconv.Atoi(f[0]); err == nil {
					return uid
				}
			}
		}
	}
	return -1
}
