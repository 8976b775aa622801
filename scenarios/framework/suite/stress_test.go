package suite

import (
	"bufio"
	"errors"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

func TestStressFlag(t *testing.T) {
	for arg, want := range map[string]int{"": 0, "0": 0, "2": 2, "16": 16} {
		o := options{provider: cluster.DefaultProvider, output: t.TempDir(), stressArg: arg}
		require.NoError(t, o.complete("x"), "--stress=%q: expected it accepted", arg)
		assert.Equal(t, want, o.stress, "--stress=%q: expected %d workers, saw %d", arg, want, o.stress)
	}
	for _, arg := range []string{"-1", "two", "1.5", "2x", " 2"} {
		o := options{provider: cluster.DefaultProvider, output: t.TempDir(), stressArg: arg}
		err := o.complete("x")
		want := "--stress (env GAUNTLET_STRESS, make STRESS=N): " + strconv.Quote(arg) + " is not a number of CPU-bound worker processes: want a whole number, 0 (none, the default) or more"
		require.ErrorContains(t, err, want, "--stress=%q: expected an error naming the flag and the accepted values, saw %v", arg, err)
	}

	t.Setenv("GAUNTLET_STRESS", "3")
	var o options
	fs := flag.NewFlagSet("suite", flag.ContinueOnError)
	o.register(fs)
	require.NoError(t, fs.Parse(nil))
	assert.Equal(t, "3", o.stressArg, "GAUNTLET_STRESS=3: expected it as --stress's default")
	require.NoError(t, fs.Parse([]string{"--stress=1"}))
	assert.Equal(t, "1", o.stressArg, "--stress=1 with GAUNTLET_STRESS=3: expected the flag to win")
}

// utime is a process's user CPU time in clock ticks (/proc/<pid>/stat, field 14), and whether it
// still runs (neither gone nor a zombie).
func utime(t *testing.T, pid int) (ticks int, running bool) {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return 0, false
	}
	require.NoError(t, err)
	// The fields after the command name, which is in parentheses and may hold spaces: state
	// (field 3) first, utime (field 14) twelfth.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	ticks, err = strconv.Atoi(fields[11])
	require.NoError(t, err)
	return ticks, fields[0] != "Z"
}

func requireGone(t *testing.T, pids []int, after string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for {
			_, running := utime(t, pid)
			if !running {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stress worker %d still runs 5 s after %s: a leftover spinner", pid, after)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func TestStressWorkersBurnCPUAndAreGoneAfterStop(t *testing.T) {
	st, err := startStress(2)
	require.NoError(t, err)
	pids := st.pids()
	require.Len(t, pids, 2, "--stress=2: expected 2 worker processes")
	t.Cleanup(func() { _ = st.stop() })

	start := map[int]int{}
	for _, pid := range pids {
		start[pid], _ = utime(t, pid)
	}
	// A spinning worker gets most of a CPU; 20 ticks (0.2 s at USER_HZ=100) within 10 s holds
	// even on a loaded 2-core machine.
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for {
			now, running := utime(t, pid)
			require.True(t, running, "stress worker %d ended by itself", pid)
			if now-start[pid] >= 20 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stress worker %d used %d ticks of user CPU in 10 s: expected it to spin", pid, now-start[pid])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	require.NoError(t, st.stop())
	requireGone(t, pids, "stop")
	require.NoError(t, st.stop(), "a second stop (the interrupt handler's and the suite's own) must do nothing")
	assert.Empty(t, st.pids())

	none, err := startStress(0)
	require.NoError(t, err)
	assert.Empty(t, none.pids(), "--stress=0: expected no worker")
	require.NoError(t, none.stop())
}

// stressHelperEnv makes TestStressHelper a suite with workers that its parent test kills or
// interrupts.
const stressHelperEnv = "GAUNTLET_STRESS_TEST_HELPER"

// TestStressHelper is the process TestStressWorkersDieWithTheSuite signals: a suite that starts
// 2 workers, watches for Ctrl-C as Run does, and waits.
func TestStressHelper(t *testing.T) {
	if os.Getenv(stressHelperEnv) == "" {
		t.Skip("run by TestStressWorkersDieWithTheSuite")
	}
	s := &Suite{spec: Spec{Name: "stress"}, progress: newProgress(os.Stdout), opts: options{provider: cluster.DefaultProvider, clusterName: "e2e-stress", stress: 2}}
	stop := s.deleteClusterOnInterrupt()
	defer stop()
	require.NoError(t, s.startStress())
	time.Sleep(time.Minute)
}

var workerPIDs = regexp.MustCompile(`stress: 2 CPU-bound workers beside the suite \(gauntlet-stress-worker, pids ([0-9]+) ([0-9]+)\)`)

// A suite killed (kill -9, a test timeout) or interrupted (Ctrl-C) leaves no worker spinning.
func TestStressWorkersDieWithTheSuite(t *testing.T) {
	for name, sig := range map[string]syscall.Signal{"killed": syscall.SIGKILL, "interrupted": syscall.SIGINT} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestStressHelper$", "-test.v") //nolint:gosec // G204: this test binary
			cmd.Env = append(os.Environ(), stressHelperEnv+"=1")
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill() })

			lines := bufio.NewScanner(out)
			var pids []int
			var seen []string
			for len(pids) == 0 && lines.Scan() {
				seen = append(seen, lines.Text())
				if m := workerPIDs.FindStringSubmatch(lines.Text()); m != nil {
					for _, p := range m[1:] {
						pid, _ := strconv.Atoi(p)
						pids = append(pids, pid)
					}
				}
			}
			require.Len(t, pids, 2, "expected the suite to name its 2 workers once at start; it printed:\n%s", strings.Join(seen, "\n"))
			for _, pid := range pids {
				_, running := utime(t, pid)
				require.True(t, running, "stress worker %d is not running", pid)
			}

			require.NoError(t, cmd.Process.Signal(sig))
			var rest strings.Builder
			for lines.Scan() {
				rest.WriteString(lines.Text() + "\n")
			}
			err = cmd.Wait()
			if sig == syscall.SIGINT {
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit, "interrupted suite: expected exit 130")
				assert.Equal(t, 130, exit.ExitCode(), "interrupted suite: expected exit 130; it printed:\n%s", rest.String())
				assert.Contains(t, rest.String(), "stress workers stopped (2)", "interrupted suite: expected it to stop its workers itself")
			}
			requireGone(t, pids, "the suite was "+name)
		})
	}
}
