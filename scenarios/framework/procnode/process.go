package procnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// containerProcess is one run of a container: a host process in its own process group.
type containerProcess struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time

	done     chan struct{}
	mu       sync.Mutex
	exitCode int32
	reason   string
	finished time.Time
}

// startProcess launches the init (self re-executed with podInitArg) that becomes the
// container binary. isolate puts it into new mount and UTS namespaces (root only). It
// returns once the binary has been exec'd, or with the init's error.
func startProcess(self string, spec *initSpec, isolate bool, logPath string) (*containerProcess, error) {
	// The node's own files (only it reads container logs back): 0750 and 0600. Closing this
	// process's ends of the log file and pipes below cannot fail in a way that matters: the
	// child holds its own descriptors, and the outcome is its exit status.
	if err := os.MkdirAll(filepath.Dir(logPath), 0o750); err != nil {
		return nil, fmt.Errorf("creating log dir for %s: %w", logPath, err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // G304: the container's log path under the node's state dir
	if err != nil {
		return nil, fmt.Errorf("opening log file %s: %w", logPath, err)
	}
	defer func() { _ = logFile.Close() }()
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating init spec pipe: %w", err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		_ = specR.Close()
		_ = specW.Close()
		return nil, fmt.Errorf("creating init status pipe: %w", err)
	}
	defer func() { _ = statusR.Close() }()

	cmd := exec.Command(self, podInitArg)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{specR, statusW} // fds 3 and 4
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if isolate {
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS
	}
	// Pdeathsig fires when the *thread* that forked the child exits, and goroutines that
	// LockOSThread and return (createNetns) make the runtime terminate their thread: fork
	// from a thread locked for the child's whole life, so no other goroutine ever runs on it.
	startErr := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			startErr <- err
			return
		}
		startErr <- nil
		<-exited
		runtime.UnlockOSThread()
	}()
	err = <-startErr
	_ = specR.Close()
	_ = statusW.Close()
	if err != nil {
		_ = specW.Close()
		return nil, fmt.Errorf("starting init %s: %w", self, err)
	}
	raw, err := json.Marshal(spec)
	if err == nil {
		_, err = specW.Write(raw)
	}
	if cerr := specW.Close(); err == nil {
		err = cerr // the init reads the spec to EOF: a failed close is a failed send
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		close(exited)
		return nil, fmt.Errorf("sending init spec: %w", err)
	}
	// The status pipe closes on exec (success) or carries the init's error.
	msg, _ := io.ReadAll(statusR)
	if len(msg) > 0 {
		_ = cmd.Wait()
		close(exited)
		return nil, errors.New(string(msg))
	}

	p := &containerProcess{cmd: cmd, pid: cmd.Process.Pid, started: time.Now(), done: make(chan struct{})}
	go func() {
		p.wait()
		close(exited)
	}()
	return p, nil
}

func (p *containerProcess) wait() {
	err := p.cmd.Wait()
	// Whatever the container left in its process group goes with it, as with a cgroup.
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	p.mu.Lock()
	p.finished = time.Now()
	p.exitCode, p.reason = exitStatus(p.cmd.ProcessState, err)
	p.mu.Unlock()
	close(p.done)
}

// exitStatus maps a process end to the code and reason a container runtime reports
// (128+signal for a signalled process, "Completed" for 0, "Error" otherwise).
func exitStatus(ps *os.ProcessState, err error) (int32, string) {
	if ps == nil {
		return 128, fmt.Sprintf("Error: %v", err)
	}
	code := clampInt32(ps.ExitCode())
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + clampInt32(int(ws.Signal()))
	}
	if code == 0 {
		return 0, "Completed"
	}
	return code, "Error"
}

// clampInt32 converts n for an int32 API field, saturating at int32's bounds; the numbers
// converted (exit codes, signal numbers, ports) are far inside them.
func clampInt32(n int) int32 {
	switch {
	case n > math.MaxInt32:
		return math.MaxInt32
	case n < math.MinInt32:
		return math.MinInt32
	}
	return int32(n)
}

// exited returns the exit code, reason and time; valid once done is closed.
func (p *containerProcess) exited() (int32, string, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode, p.reason, p.finished
}

// stop sends SIGTERM to the process group, then SIGKILL after grace, and waits for exit.
func (p *containerProcess) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		<-p.done
	}
}
