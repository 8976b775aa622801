package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/steps"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
)

// Destroy stops cert-manager and the node agent (SIGTERM, so the agent removes its mounts,
// namespaces and listeners), deletes the control plane, checks nothing is left and removes
// the state directory. Destroying a cluster that does not exist is not an error.
func (p *Provider) Destroy(ctx context.Context) error {
	return p.destroy(ctx, p.out)
}

func (p *Provider) destroy(ctx context.Context, out io.Writer) error {
	l := newLayout(p.name)
	if _, err := os.Stat(l.dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	pr := steps.New(out)
	pr.Printf("Deleting local cluster %q …\n", p.name)
	cfg, cfgErr := LoadConfig(l.config())
	var errs []error
	// A node that was killed before (not stopped by us) cannot have cleaned up: what it left
	// is removed below and is not the node's fault.
	nodeWasKilled := false
	if cfgErr == nil {
		_, running := nodeDaemon(cfg, l).running()
		nodeWasKilled = !cfg.Node.Disabled && !running
		if cfg.CertManager.Enabled {
			errs = append(errs, pr.Step("Stopping cert-manager", func() error {
				return certManagerDaemon(cfg, l).stop(ctx, 10*time.Second)
			}))
		}
		if !cfg.Node.Disabled {
			errs = append(errs, pr.Step("Stopping node "+cfg.NodeName(), func() error {
				return nodeDaemon(cfg, l).stop(ctx, 15*time.Second)
			}))
			// A node that had to be killed (or was killed before) leaves its links and mount
			// targets on the host; they are only removed once it is gone.
			if _, running := nodeDaemon(cfg, l).running(); !running {
				errs = append(errs, pr.Step("Removing what the node left on the host", func() error {
					return procnode.CleanHost(cfg.NodeName())
				}))
			}
		}
		if fileExists(l.kwokCluster()) {
			errs = append(errs, pr.Step("Deleting control plane", func() error {
				return newKwokctl(cfg, l).delete(ctx)
			}))
		}
	}
	errs = append(errs, pr.Step("Removing state "+l.dir, func() error {
		// Never RemoveAll through a mount: a bind mount left behind would have its source
		// (possibly a host directory) emptied. Detach leftovers first and report them.
		left := mountsUnder(l.dir)
		for _, m := range left {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
		if still := mountsUnder(l.dir); len(still) > 0 {
			return fmt.Errorf("mounts left under %s, not removing it: %s", l.dir, strings.Join(still, ", "))
		}
		if err := os.RemoveAll(l.dir); err != nil {
			return err
		}
		if len(left) > 0 && !nodeWasKilled {
			return fmt.Errorf("the node agent left mounts behind (detached now): %s", strings.Join(left, ", "))
		}
		return nil
	}))
	if cfgErr == nil {
		errs = append(errs, pr.Step("Checking nothing is left", func() error {
			// A killed process is gone from ps before the kernel has closed all its sockets
			// (threads exit one by one under load), so give the host a moment to settle.
			var left []string
			_ = poll.UntilEvery(ctx, "the host to settle", 100*time.Millisecond, 5*time.Second, func(context.Context) (bool, string, error) {
				left = Leftovers(cfg)
				return len(left) == 0, "", nil
			})
			if len(left) > 0 {
				return fmt.Errorf("cluster %q left behind:\n  %s", p.name, strings.Join(left, "\n  "))
			}
			return nil
		}))
	}
	return errors.Join(append(errs, cfgErr)...)
}

// mountsUnder lists mount points at or below dir in this mount namespace, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }() // read only
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == real || strings.HasPrefix(mp, real+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for space and so on).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
