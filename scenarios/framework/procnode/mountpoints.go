package procnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hostMountpointRegistry is where every process node on the host records the mount targets
// it created (see mountpoints).
const hostMountpointRegistry = "/run/gauntlet-node/mountpoints"

// mountpoints creates missing mount targets (and working dirs) on the host. Pod mount
// namespaces share the host's filesystem, so a target has to exist there before a bind
// mount can cover it; the nodes remove what they created once no pod needs it, leaving
// the host as they found it.
//
// The bookkeeping is host-wide, not per node: removing a directory that is a mount point
// in another mount namespace succeeds and silently detaches that mount (Linux ≥ 3.18). So
// when two nodes (two test clusters at once) mount volumes at the same path, such as
// /tmp/k8s-webhook-server/serving-certs, the first node's cleanup would empty the path
// under the other node's running pods. Every node therefore records in one registry
// (dir/state.json, guarded by flock on dir/lock) which paths were created and who holds
// each; a path is removed when its last live holder lets go. Holders are node processes,
// so the registry also outlives a killed node: entries whose holders all died are removed
// by the next node that touches the registry.
type mountpoints struct {
	dir    string
	holder string // this node: "<pid>:<start time>:<instance>"
}

// mountpointState is the registry: created path → holder → references.
type mountpointState map[string]map[string]int

func newMountpoints(registryDir, instance string) (*mountpoints, error) {
	self, err := processKey(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("identifying this process for the mount target registry: %w", err)
	}
	return &mountpoints{dir: registryDir, holder: self + ":" + instance}, nil
}

// processKey names a live process by pid and start time, so a reused pid is not mistaken
// for the process that held a path.
func processKey(pid int) (string, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// Field 2 (comm) is parenthesised and may hold spaces; start time is field 22.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	fields := strings.Fields(rest)
	if len(fields) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return strconv.Itoa(pid) + ":" + fields[19], nil
}

// holderAlive reports whether the node process that recorded holder still runs.
func holderAlive(holder string) bool {
	parts := strings.SplitN(holder, ":", 3)
	if len(parts) != 3 {
		return false
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil {
		return false
	}
	key, err := processKey(pid)
	return err == nil && key == parts[0]+":"+parts[1]
}

// update runs fn on the registry under the host-wide lock, then removes (deepest first,
// and only while empty) every path left without a live holder. A registry that records
// nothing afterwards is removed, so the host keeps nothing of the nodes once they are gone.
func (m *mountpoints) update(fn func(mountpointState) error) error {
	unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()

	state, err := readMountpointState(m.dir)
	if err != nil {
		return err
	}
	fnErr := fn(state)

	var orphans []string
	for p, holders := range state {
		for h, refs := range holders {
			if refs <= 0 || (h != m.holder && !holderAlive(h)) {
				delete(holders, h)
			}
		}
		if len(holders) == 0 {
			orphans = append(orphans, p)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(orphans)))
	for _, p := range orphans {
		// Only if empty: something else may have put files there meanwhile.
		_ = os.Remove(p)
		delete(state, p)
	}
	if len(state) == 0 {
		return errors.Join(fnErr, m.remove())
	}
	if err := writeMountpointState(filepath.Join(m.dir, "state.json"), state); err != nil {
		return errors.Join(fnErr, err)
	}
	return fnErr
}

// lock takes the registry's host-wide lock (flock on dir/lock), creating the registry when
// it does not exist. The last node removes the registry, lock file included, while holding
// the lock; a node that was waiting then holds a lock on a removed file, so it checks that
// the file it locked is still the registry's and starts over if not.
func (m *mountpoints) lock() (unlock func(), err error) {
	path := filepath.Join(m.dir, "lock")
	for {
		// Only node daemons (root) use the registry: 0750 and 0600. Closing the lock file
		// cannot fail in a way that matters: the descriptor goes, and with it the lock.
		if err := os.MkdirAll(m.dir, 0o750); err != nil {
			return nil, fmt.Errorf("creating the mount target registry %s: %w", m.dir, err)
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // G304: the registry's lock file in its fixed directory
		if err != nil {
			return nil, fmt.Errorf("opening the mount target registry lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("locking the mount target registry %s: %w", m.dir, err)
		}
		locked, errLocked := f.Stat()
		current, errCurrent := os.Stat(path)
		if errLocked == nil && errCurrent == nil && os.SameFile(locked, current) {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); _ = f.Close() }, nil
		}
		_ = f.Close() // removed by the last node while this one waited: lock the new one
	}
}

// remove deletes the registry (under its lock) and /run/gauntlet-node when that is empty.
func (m *mountpoints) remove() error {
	for _, name := range []string{"state.json", "lock"} {
		if err := os.Remove(filepath.Join(m.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the empty mount target registry: %w", err)
		}
	}
	if err := os.Remove(m.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the empty mount target registry: %w", err)
	}
	_ = os.Remove(filepath.Dir(m.dir)) // only if empty
	return nil
}

func writeMountpointState(file string, state mountpointState) error {
	raw, err := json.MarshalIndent(state, "", "  ")
	if err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return fmt.Errorf("writing the mount target registry: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("writing the mount target registry: %w", err)
	}
	return nil
}

// removeOrphans removes the paths whose holders all died (a killed node's leftovers).
func (m *mountpoints) removeOrphans() error {
	return m.update(func(mountpointState) error { return nil })
}

// ensure makes path exist (as a file when file is set, else a directory) and returns the
// paths this call holds, to pass to release.
func (m *mountpoints) ensure(path string, file bool) ([]string, error) {
	path = filepath.Clean(path)
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("mount path %q is not absolute", path)
	}
	// Walk from the top so every component we hold is recorded before its children.
	var chain []string
	for p := path; ; p = filepath.Dir(p) {
		chain = append([]string{p}, chain...)
		if p == "/" {
			break
		}
	}
	var held []string
	err := m.update(func(state mountpointState) error {
		hold := func(p string) {
			if state[p] == nil {
				state[p] = map[string]int{}
			}
			state[p][m.holder]++
			held = append(held, p)
		}
		for i, p := range chain {
			if _, ok := state[p]; ok {
				hold(p)
				continue
			}
			if _, err := os.Lstat(p); err == nil {
				continue // there before any node: never ours to remove
			} else if !os.IsNotExist(err) {
				return fmt.Errorf("checking mount path %s: %w", p, err)
			}
			var err error
			if file && i == len(chain)-1 {
				// Mount paths live in the host's tree (/var/run/secrets/…): they get the usual
				// 0644 and 0755 of such paths, and the bind mount covers the last one.
				var f *os.File
				if f, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil { //nolint:gosec // G302/G304: a pod's mount path, see above
					err = f.Close()
				}
			} else {
				err = os.Mkdir(p, 0o755) //nolint:gosec // G301: a pod's mount path, see above
			}
			if err != nil {
				return fmt.Errorf("creating mount path %s: %w", p, err)
			}
			hold(p)
		}
		return nil
	})
	if err != nil {
		m.release(held)
		return nil, err
	}
	return held, nil
}

// release drops the references ensure returned; paths nobody holds any more are removed.
func (m *mountpoints) release(held []string) {
	if len(held) == 0 {
		return
	}
	_ = m.update(func(state mountpointState) error {
		for _, p := range held {
			if holders := state[p]; holders != nil {
				holders[m.holder]--
			}
		}
		return nil
	})
}

// releaseAll releases several holds.
func (m *mountpoints) releaseAll(holds [][]string) {
	for i := len(holds) - 1; i >= 0; i-- {
		m.release(holds[i])
	}
}
