package suite

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// StressWorkerName is every stress worker's $0: `pgrep -f gauntlet-stress-worker` lists the
// workers of every suite running on the machine.
const StressWorkerName = "gauntlet-stress-worker"

// stressScript is one worker: a shell busy loop, so that the contention comes from separate
// processes at the suite's priority, scheduled by the kernel against the cluster's processes,
// and never from goroutines sharing the test binary's scheduler with the scenarios. Every
// ~0.1 s of spinning it checks that the suite that started it is alive: Pdeathsig kills it
// when the suite dies, and this check is what still ends it should the signal not come.
const stressScript = `parent=$PPID
while kill -0 "$parent" 2>/dev/null; do
  i=0
  while [ "$i" -lt 100000 ]; do i=$((i+1)); done
done`

// ParseStress reads a stress level: how many CPU-bound worker processes run beside a suite, a
// whole number from 0 (none, the default; "" means 0 too).
func ParseStress(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a number of CPU-bound worker processes: want a whole number, 0 (none, the default) or more, e.g. 2", v)
	}
	return n, nil
}

// stress is a running set of workers. stop ends them; it is safe to call more than once and
// from the interrupt handler while the suite's own goroutine calls it too.
type stress struct {
	mu      sync.Mutex
	workers []*exec.Cmd
	// release lets the goroutine that forked the workers end, once they are gone.
	release     chan struct{}
	releaseOnce sync.Once
}

// startStress starts n workers (none for n = 0).
func startStress(n int) (*stress, error) {
	st := &stress{release: make(chan struct{})}
	if n == 0 {
		return st, nil
	}
	// Pdeathsig fires when the *thread* that forked the child exits, and the runtime ends a
	// thread whose goroutine returns while locked to it (the local provider's network
	// namespaces do that): fork from a thread locked until the workers are gone, so no other
	// goroutine ever runs on it.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for i := range n {
			cmd := exec.Command("/bin/sh", "-c", stressScript, StressWorkerName)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				started <- fmt.Errorf("starting stress worker %d of %d (/bin/sh): %w", i+1, n, err)
				return
			}
			st.mu.Lock()
			st.workers = append(st.workers, cmd)
			st.mu.Unlock()
		}
		started <- nil
		<-st.release
	}()
	if err := <-started; err != nil {
		return nil, errors.Join(err, st.stop())
	}
	return st, nil
}

// pids are the running workers' process IDs.
func (st *stress) pids() []int {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]int, 0, len(st.workers))
	for _, c := range st.workers {
		out = append(out, c.Process.Pid)
	}
	return out
}

// stop kills every worker and waits for it, so none is left spinning (nor a zombie).
func (st *stress) stop() error {
	st.mu.Lock()
	workers := st.workers
	st.workers = nil
	st.mu.Unlock()
	var errs []error
	for _, c := range workers {
		if err := c.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("stopping stress worker %d: %w", c.Process.Pid, err))
		}
		_ = c.Wait() // its exit status is the SIGKILL just sent
	}
	st.releaseOnce.Do(func() { close(st.release) })
	return errors.Join(errs...)
}
