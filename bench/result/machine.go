package result

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes the computer a run measured on.
type Machine struct {
	Hostname string `json:"hostname"`
	// CPUModel is /proc/cpuinfo's "model name" (or the closest field on
	// architectures that lack it).
	CPUModel string `json:"cpuModel"`
	// Cores is the number of logical CPUs the Go runtime may use, which is
	// what the benchmark processes compete for.
	Cores int `json:"cores"`
	// MemoryBytes is /proc/meminfo's MemTotal.
	MemoryBytes uint64 `json:"memoryBytes"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	// Kernel is /proc/sys/kernel/osrelease on Linux.
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"goVersion"`
}

// String is a one-line description for reports.
func (m Machine) String() string {
	parts := []string{}
	if m.CPUModel != "" {
		parts = append(parts, m.CPUModel)
	}
	parts = append(parts, fmt.Sprintf("%d cores", m.Cores))
	if m.MemoryBytes > 0 {
		parts = append(parts, fmt.Sprintf("%.1f GiB", float64(m.MemoryBytes)/(1<<30)))
	}
	osArch := m.OS + "/" + m.Arch
	if m.Kernel != "" {
		osArch += " (" + m.Kernel + ")"
	}
	parts = append(parts, osArch, m.GoVersion)
	if m.Hostname != "" {
		parts = append([]string{m.Hostname}, parts...)
	}
	return strings.Join(parts, " · ")
}

// DescribeMachine describes the current machine. Fields that cannot be read
// (no /proc outside Linux) stay empty rather than failing the run: a
// benchmark without a CPU model is still worth its numbers.
func DescribeMachine() Machine {
	m := Machine{
		Cores:     runtime.NumCPU(),
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		GoVersion: runtime.Version(),
	}
	m.Hostname, _ = os.Hostname()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		m.CPUModel = parseCPUModel(f)
		_ = f.Close() // read only
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		m.MemoryBytes = parseMemTotal(f)
		_ = f.Close() // read only
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// LoadAverage is the 1-minute load average (runnable plus uninterruptible
// tasks) at the start and the end of a run.
type LoadAverage struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// ReadLoadAverage returns the 1-minute load average from /proc/loadavg; ok is
// false where there is none.
func ReadLoadAverage() (load float64, ok bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	return parseLoadAverage(string(b))
}

func parseLoadAverage(s string) (float64, bool) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// parseCPUModel returns the first CPU's model. x86 kernels print "model
// name"; arm64 kernels often print only "Hardware" or "CPU implementer/part",
// so those are fallbacks.
func parseCPUModel(r io.Reader) string {
	fields := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if _, seen := fields[k]; !seen && v != "" {
			fields[k] = v
		}
	}
	for _, k := range []string{"model name", "Hardware", "cpu model", "Processor"} {
		if v := fields[k]; v != "" {
			return v
		}
	}
	if impl, part := fields["CPU implementer"], fields["CPU part"]; impl != "" {
		return "implementer " + impl + " part " + part
	}
	return ""
}

// parseMemTotal returns MemTotal in bytes (the file states kB, meaning KiB).
func parseMemTotal(r io.Reader) uint64 {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0
			}
			if len(f) >= 3 && f[2] == "kB" {
				n *= 1024
			}
			return n
		}
	}
	return 0
}

// GitRevision returns the commit checked out in dir, with "-dirty" appended
// when tracked files have uncommitted changes: a baseline measured on a dirty
// tree cannot be reproduced from its revision alone, and the report says so.
func GitRevision(ctx context.Context, dir string) (string, error) {
	head, err := Git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	status, err := Git(ctx, dir, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return "", err
	}
	if status != "" {
		head += "-dirty"
	}
	return head, nil
}

// Git runs git with args in dir and returns its trimmed output; an error quotes git's stderr.
func Git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...) //nolint:gosec // G204: git with the subcommands this file passes, in the checkout being measured
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("running git %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
