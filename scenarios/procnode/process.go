package procnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("creating log dir for %s: %w", logPath, err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log file %s: %w", logPath, err)
	}
	defer logFile.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating init spec pipe: %w", err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, fmt.Errorf("creating init status pipe: %w", err)
	}
	defer statusR.Close()

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
	specR.Close()
	statusW.Close()
	if err != nil {
		specW.Close()
		return nil, fmt.Errorf("starting init %s: %w", self, err)
	}
	raw, err := json.Marshal(spec)
	if err == nil {
		_, err = specW.Write(raw)
	}
	specW.Close()
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
	code := int32(ps.ExitCode())
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int32(ws.Signal())
	}
	if code == 0 {
		return 0, "Completed"
	}
	return code, "Error"
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
