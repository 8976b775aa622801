package suite

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// InterruptGrace is how long an interrupted suite may take to delete its cluster.
const InterruptGrace = 2 * time.Minute

// InterruptibleCommand is exec.CommandContext for commands that run suites (`go test
// ./e2e/<suite>`): when ctx ends it interrupts the command's whole process group (SIGINT, as
// Ctrl-C would) and gives it InterruptGrace before it is killed. A suite deletes its cluster
// on an interrupt; killed — or with only `go`, not the test binary, signalled — it would leave
// the cluster running.
func InterruptibleCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...) //nolint:gosec // G204: the callers run go and git with arguments they build
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = InterruptGrace
	return cmd
}
