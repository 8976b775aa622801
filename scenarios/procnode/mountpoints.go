package procnode

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// mountpoints creates missing mount targets (and working dirs) on the host. Pod mount
// namespaces share the host's filesystem, so a target has to exist there before a bind
// mount can cover it; the node removes what it created once no pod needs it, leaving the
// host as it found it.
type mountpoints struct {
	mu   sync.Mutex
	refs map[string]int // path the node created → users
	// journal lists the created paths on disk, so a node that was killed can remove them
	// on its next start (removeJournaled). Empty: no journal.
	journal string
}

func newMountpoints(journal string) *mountpoints {
	return &mountpoints{refs: map[string]int{}, journal: journal}
}

// removeJournaled removes the paths a previous, killed node created (deepest first, and
// only while empty) and clears the journal.
func removeJournaled(journal string) {
	raw, err := os.ReadFile(journal)
	if err != nil {
		return
	}
	paths := strings.Split(strings.TrimSpace(string(raw)), "\n")
	sort.Sort(sort.Reverse(sort.StringSlice(paths)))
	for _, p := range paths {
		if filepath.IsAbs(p) && p != "/" {
			_ = os.Remove(p)
		}
	}
	_ = os.Remove(journal)
}

func (m *mountpoints) writeJournalLocked() {
	if m.journal == "" {
		return
	}
	if len(m.refs) == 0 {
		_ = os.Remove(m.journal)
		return
	}
	paths := make([]string, 0, len(m.refs))
	for p := range m.refs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	tmp := m.journal + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(paths, "\n")+"\n"), 0o644); err == nil {
		_ = os.Rename(tmp, m.journal)
	}
}

// ensure makes path exist (as a file when file is set, else a directory) and returns the
// paths this call holds, to pass to release.
func (m *mountpoints) ensure(path string, file bool) ([]string, error) {
	path = filepath.Clean(path)
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("mount path %q is not absolute", path)
	}
	m.mu.Lock()
	defer m.mu.Unlock()

	// Walk from the top so every component we hold is recorded before its children.
	var chain []string
	for p := path; ; p = filepath.Dir(p) {
		chain = append([]string{p}, chain...)
		if p == "/" {
			break
		}
	}
	var held []string
	for i, p := range chain {
		if _, ok := m.refs[p]; ok {
			m.refs[p]++
			held = append(held, p)
			continue
		}
		if _, err := os.Lstat(p); err == nil {
			continue
		} else if !os.IsNotExist(err) {
			m.releaseLocked(held)
			return nil, fmt.Errorf("checking mount path %s: %w", p, err)
		}
		var err error
		if file && i == len(chain)-1 {
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
				err = f.Close()
			}
		} else {
			err = os.Mkdir(p, 0o755)
		}
		if err != nil {
			m.releaseLocked(held)
			return nil, fmt.Errorf("creating mount path %s: %w", p, err)
		}
		m.refs[p] = 1
		held = append(held, p)
	}
	m.writeJournalLocked()
	return held, nil
}

// release drops the references ensure returned, removing paths nobody holds any more.
func (m *mountpoints) release(held []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releaseLocked(held)
}

func (m *mountpoints) releaseLocked(held []string) {
	for i := len(held) - 1; i >= 0; i-- {
		p := held[i]
		m.refs[p]--
		if m.refs[p] > 0 {
			continue
		}
		delete(m.refs, p)
		// Remove only if empty: something else may have put files there meanwhile.
		_ = os.Remove(p)
	}
	m.writeJournalLocked()
}

// releaseAll releases several holds.
func (m *mountpoints) releaseAll(holds [][]string) {
	for i := len(holds) - 1; i >= 0; i-- {
		m.release(holds[i])
	}
}
