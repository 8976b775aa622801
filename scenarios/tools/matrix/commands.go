package matrix

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// SuiteTimeout bounds one suite's `go test`: the slowest (multioperator with the full failover
// plan on kind) takes about 21 minutes on 2 cores.
const SuiteTimeout = "60m"

// Commands are the real Steps: the workspace's hack/ scripts and `go test ./e2e/<suite>`.
type Commands struct {
	// Root is the workspace.
	Root string
}

var _ Steps = Commands{}

// Prepare builds (or finds cached) the version's control-plane binaries, then runs what the
// provider needs on this host for that version (kind: a host check and the node image).
func (c Commands) Prepare(ctx context.Context, version, provider string, log io.Writer) error {
	p, err := cluster.Lookup(provider)
	if err != nil {
		return err
	}
	scripts := [][]string{{"hack/control-plane.sh"}}
	if p.HostPreparation != nil {
		scripts = append(scripts, p.HostPreparation()...)
	}
	for _, s := range scripts {
		if err := c.run(ctx, log, []string{"K8S_VERSION=" + version}, filepath.Join(c.Root, s[0]), s[1:]...); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(s, " "), err)
		}
	}
	return nil
}

// RunSuite runs `go test ./e2e/<suite>` on the cell's provider and version, beside the cell's
// stress workers, as `make e2e` does (the multioperator suite with the full failover plan).
// --stress is passed even when 0, so a GAUNTLET_STRESS in the environment cannot contend a
// cell whose report says it ran calm.
func (c Commands) RunSuite(ctx context.Context, cell Cell, reportsRoot string, log io.Writer) error {
	return c.run(ctx, log, []string{"GAUNTLET_FAILOVER_PLAN=full"}, "go", "test", "-count=1", "-v", "-timeout", SuiteTimeout, "./e2e/"+cell.Suite, "-args",
		"--provider="+cell.Provider, "--kubernetes-version="+cell.Version, "--e2e-output="+reportsRoot, "--stress="+strconv.Itoa(cell.Stress))
}

// run runs name in the workspace with its output to log; a failure's error ends with the last
// line the command wrote, which usually says why.
func (c Commands) run(ctx context.Context, log io.Writer, env []string, name string, args ...string) error {
	cmd := suite.InterruptibleCommand(ctx, name, args...)
	cmd.Dir = c.Root
	cmd.Env = append(os.Environ(), env...)
	var tail lastLine
	cmd.Stdout = io.MultiWriter(log, &tail)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		if l := tail.String(); l != "" {
			return fmt.Errorf("%w: %s", err, l)
		}
		return err
	}
	return nil
}

// lastLine keeps the last non-empty line written to it.
type lastLine struct {
	partial, last []byte
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		if line := bytes.TrimSpace(l.partial[:i]); len(line) > 0 {
			l.last = append(l.last[:0], line...)
		}
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *lastLine) String() string {
	if line := bytes.TrimSpace(l.partial); len(line) > 0 {
		return string(line)
	}
	return string(l.last)
}
