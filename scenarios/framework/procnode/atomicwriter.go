package procnode

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Kubelet's on-disk protocol for Secret, ConfigMap, downward API and projected volumes:
// the files live in a timestamped directory, "..data" is a symlink to it, and each
// user-visible top-level entry is a symlink through "..data". Swapping "..data" with one
// rename makes every update atomic for readers (certwatcher and friends rely on it).
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	tsDirLayout    = "..2006_01_02_15_04_05."
)

// volumeFile is one file of a volume's payload.
type volumeFile struct {
	data []byte
	mode fs.FileMode
}

// writeAtomically makes dir present exactly payload (paths relative to dir). It reports
// whether anything changed; an identical payload leaves the directory untouched.
func writeAtomically(dir string, payload map[string]volumeFile) (bool, error) {
	for p := range payload {
		if err := validatePayloadPath(p); err != nil {
			return false, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // G301: a volume's directory is 0755, as kubelet makes it; pods see it
		return false, fmt.Errorf("creating volume dir %s: %w", dir, err)
	}
	oldTS, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil && !os.IsNotExist(err) {
		return false, fmt.Errorf("reading %s in %s: %w", dataDirName, dir, err)
	}
	var oldPaths map[string]bool
	if oldTS != "" {
		same, paths, err := payloadMatches(filepath.Join(dir, oldTS), payload)
		if err != nil {
			return false, err
		}
		if same {
			return false, nil
		}
		oldPaths = paths
	}

	tsDir, err := os.MkdirTemp(dir, time.Now().UTC().Format(tsDirLayout))
	if err != nil {
		return false, fmt.Errorf("creating timestamped dir in %s: %w", dir, err)
	}
	if err := os.Chmod(tsDir, 0o755); err != nil { //nolint:gosec // G302: kubelet's AtomicWriter makes the timestamped dir 0755; pods see it
		return false, fmt.Errorf("chmod %s: %w", tsDir, err)
	}
	if err := writePayload(tsDir, payload); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, err
	}

	tmpLink := filepath.Join(dir, newDataDirName)
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, fmt.Errorf("creating %s in %s: %w", newDataDirName, dir, err)
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataDirName)); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, fmt.Errorf("swapping %s in %s: %w", dataDirName, dir, err)
	}

	newTop := topLevelNames(payload)
	for name := range newTop {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataDirName, name), link); err != nil {
			return true, fmt.Errorf("creating user-visible link %s: %w", link, err)
		}
	}
	for p := range oldPaths {
		name := strings.SplitN(p, "/", 2)[0]
		if newTop[name] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
			return true, fmt.Errorf("removing stale link %s in %s: %w", name, dir, err)
		}
	}
	if oldTS != "" {
		if err := os.RemoveAll(filepath.Join(dir, oldTS)); err != nil {
			return true, fmt.Errorf("removing old data dir %s in %s: %w", oldTS, dir, err)
		}
	}
	return true, nil
}

func validatePayloadPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("volume payload path is empty")
	case filepath.IsAbs(p):
		return fmt.Errorf("volume payload path %q is absolute", p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("volume payload path %q is not clean", p)
	case p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(p, ".."):
		return fmt.Errorf("volume payload path %q starts with '..'", p)
	}
	return nil
}

func writePayload(root string, payload map[string]volumeFile) error {
	paths := make([]string, 0, len(payload))
	for p := range payload {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := payload[p]
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil { //nolint:gosec // G301: nested volume dirs are 0755, as kubelet makes them
			return fmt.Errorf("creating dir for %s: %w", full, err)
		}
		if err := os.WriteFile(full, f.data, f.mode); err != nil {
			return fmt.Errorf("writing %s: %w", full, err)
		}
		// WriteFile's mode is filtered by the umask; volumes must carry the exact mode.
		if err := os.Chmod(full, f.mode); err != nil {
			return fmt.Errorf("chmod %s: %w", full, err)
		}
	}
	return nil
}

// payloadMatches compares the files under tsDir with payload and returns the paths found.
func payloadMatches(tsDir string, payload map[string]volumeFile) (bool, map[string]bool, error) {
	found := map[string]bool{}
	same := true
	err := filepath.WalkDir(tsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(tsDir, path)
		if err != nil {
			return err
		}
		found[rel] = true
		want, ok := payload[rel]
		if !ok {
			same = false
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm() != want.mode.Perm() {
			same = false
			return nil
		}
		got, err := os.ReadFile(path) //nolint:gosec // G304: a file of the volume this writer owns, found by WalkDir
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want.data) {
			same = false
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return false, nil, fmt.Errorf("reading current volume data %s: %w", tsDir, err)
	}
	if len(found) != len(payload) {
		same = false
	}
	return same, found, nil
}

func topLevelNames(payload map[string]volumeFile) map[string]bool {
	names := make(map[string]bool, len(payload))
	for p := range payload {
		names[strings.SplitN(p, "/", 2)[0]] = true
	}
	return names
}
