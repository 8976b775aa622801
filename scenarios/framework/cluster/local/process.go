package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// daemon is a process the provider starts detached so that it outlives the command that made
// the cluster (`gauntlet-cluster up` returns, the cluster keeps running). Its pid file and log
// file live in the cluster's state directory, which is all a later `down` needs.
type daemon struct {
	name    string // file stem of the pid and log files
	binary  string
	args    []string
	dir     string // working directory
	env     []string
	pidFile string
	logFile string
}

func (d *daemon) start() error {
	if pid, ok := d.running(); ok {
		return fmt.Errorf("starting %s: already running as pid %d", d.name, pid)
	}
	// The cluster's state is its creator's: 0750 directories, 0600 files.
	for _, dir := range []string{filepath.Dir(d.pidFile), filepath.Dir(d.logFile), d.dir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("starting %s: %w", d.name, err)
		}
	}
	logf, err := os.OpenFile(d.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("starting %s: opening log: %w", d.name, err)
	}
	defer func() { _ = logf.Close() }()      // the daemon holds its own descriptor
	cmd := exec.Command(d.binary, d.args...) //nolint:gosec // G204: a control-plane or node binary of the cluster's configuration
	cmd.Dir = d.dir
	cmd.Env = append(os.Environ(), d.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// A new session: no controlling terminal, own process group, so Ctrl-C in the terminal that
	// ran `cluster-up` does not reach it and it survives its parent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s (%s): %w", d.name, d.binary, err)
	}
	if err := os.WriteFile(d.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("starting %s: writing pid file: %w", d.name, err)
	}
	// Reap it if it dies while we are still around, so it does not linger as a zombie that
	// running() would mistake for alive.
	go func() { _ = cmd.Wait() }()
	return nil
}

// running reports the daemon's pid if its pid file names a live process running our binary
// (a recycled pid running something else does not count).
func (d *daemon) running() (int, bool) {
	raw, err := os.ReadFile(d.pidFile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, processRuns(pid, d.binary)
}

// stop sends SIGTERM, waits up to grace for the process to exit, then kills its process group.
func (d *daemon) stop(ctx context.Context, grace time.Duration) error {
	pid, ok := d.running()
	if !ok {
		_ = os.Remove(d.pidFile)
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stopping %s (pid %d): %w", d.name, pid, err)
	}
	if !waitGone(ctx, pid, d.binary, grace) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if !waitGone(ctx, pid, d.binary, 5*time.Second) {
			return fmt.Errorf("stopping %s: pid %d survived SIGKILL", d.name, pid)
		}
		_ = os.Remove(d.pidFile)
		return fmt.Errorf("stopping %s: pid %d ignored SIGTERM for %s and was killed", d.name, pid, grace)
	}
	_ = os.Remove(d.pidFile)
	return nil
}

func waitGone(ctx context.Context, pid int, binary string, limit time.Duration) bool {
	what := fmt.Sprintf("pid %d (%s) to exit", pid, binary)
	return poll.UntilEvery(ctx, what, 50*time.Millisecond, limit, func(context.Context) (bool, string, error) {
		return !processRuns(pid, binary), "", nil
	}) == nil
}

// processRuns reports whether pid is alive (not a zombie) and executes binary.
func processRuns(pid int, binary string) bool {
	if isZombie(pid) {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	want, err := filepath.EvalSymlinks(binary)
	if err != nil {
		want = binary
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	return exe == want || filepath.Base(exe) == filepath.Base(want)
}

// tail returns the last n lines of a file, for error messages that explain a failed start.
func tail(path string, n int) string {
	raw, err := os.ReadFile(path) //nolint:gosec // G304: a daemon's log in the cluster's state dir
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
