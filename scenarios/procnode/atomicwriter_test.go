package procnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readVolumeFile(t *testing.T, dir, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, name)) //nolint:gosec // G304: a file of a volume under t.TempDir()
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func dataTarget(t *testing.T, dir string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil {
		t.Fatal(err)
	}
	return target
}

func TestWriteAtomicallyUsesKubeletLayout(t *testing.T) {
	dir := t.TempDir()
	changed, err := writeAtomically(dir, map[string]volumeFile{
		"tls.crt":      {data: []byte("cert"), mode: 0o644},
		"nested/a.txt": {data: []byte("a"), mode: 0o400},
	})
	if err != nil || !changed {
		t.Fatalf("first write: changed=%v err=%v", changed, err)
	}
	ts := dataTarget(t, dir)
	if !strings.HasPrefix(ts, "..") || strings.Contains(ts, "/") {
		t.Fatalf("..data points at %q, want a sibling timestamped dir", ts)
	}
	for name, want := range map[string]string{"tls.crt": "..data/tls.crt", "nested": "..data/nested"} {
		if got, err := os.Readlink(filepath.Join(dir, name)); err != nil || got != want {
			t.Errorf("user-visible %s -> %q (%v), want -> %q", name, got, err, want)
		}
	}
	if got := readVolumeFile(t, dir, "nested/a.txt"); got != "a" {
		t.Fatalf("nested/a.txt = %q", got)
	}
	info, err := os.Stat(filepath.Join(dir, ts, "nested", "a.txt"))
	if err != nil || info.Mode().Perm() != 0o400 {
		t.Fatalf("mode of nested/a.txt = %v (%v), want 0400", info.Mode().Perm(), err)
	}
}

func TestWriteAtomicallySwapsDataAndDropsOldFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := writeAtomically(dir, map[string]volumeFile{
		"tls.crt": {data: []byte("old"), mode: 0o644},
		"gone":    {data: []byte("x"), mode: 0o644},
	}); err != nil {
		t.Fatal(err)
	}
	first := dataTarget(t, dir)
	changed, err := writeAtomically(dir, map[string]volumeFile{"tls.crt": {data: []byte("new"), mode: 0o644}})
	if err != nil || !changed {
		t.Fatalf("update: changed=%v err=%v", changed, err)
	}
	second := dataTarget(t, dir)
	if second == first {
		t.Fatalf("..data still points at %s after an update", first)
	}
	if got := readVolumeFile(t, dir, "tls.crt"); got != "new" {
		t.Fatalf("tls.crt = %q after update", got)
	}
	for _, name := range []string{"gone", first, newDataDirName} {
		if _, err := os.Lstat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s still exists after the update (err %v)", name, err)
		}
	}
}

func TestWriteAtomicallyLeavesAnUnchangedPayloadAlone(t *testing.T) {
	dir := t.TempDir()
	payload := map[string]volumeFile{"k": {data: []byte("v"), mode: 0o644}}
	if _, err := writeAtomically(dir, payload); err != nil {
		t.Fatal(err)
	}
	first := dataTarget(t, dir)
	changed, err := writeAtomically(dir, payload)
	if err != nil || changed {
		t.Fatalf("same payload: changed=%v err=%v, want no change", changed, err)
	}
	if got := dataTarget(t, dir); got != first {
		t.Fatalf("..data moved from %s to %s for an identical payload", first, got)
	}
	// A mode change alone is a change.
	if changed, err := writeAtomically(dir, map[string]volumeFile{"k": {data: []byte("v"), mode: 0o600}}); err != nil || !changed {
		t.Fatalf("mode change: changed=%v err=%v", changed, err)
	}
}

func TestWriteAtomicallyEmptyPayloadStillPublishesData(t *testing.T) {
	dir := t.TempDir()
	if _, err := writeAtomically(dir, map[string]volumeFile{}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 { // ..data and its timestamped dir
		t.Fatalf("empty volume holds %d entries, want ..data and one timestamped dir", len(entries))
	}
}

func TestWriteAtomicallyRejectsEscapingPaths(t *testing.T) {
	for _, p := range []string{"../etc/passwd", "/abs", "a/../../b", "..data", ""} {
		if _, err := writeAtomically(t.TempDir(), map[string]volumeFile{p: {data: nil, mode: 0o644}}); err == nil {
			t.Errorf("payload path %q accepted", p)
		}
	}
}
