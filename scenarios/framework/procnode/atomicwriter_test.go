package procnode

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readVolumeFile(t *testing.T, dir, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, name)) //nolint:gosec // G304: a file of a volume under t.TempDir()
	require.NoError(t, err)
	return string(raw)
}

func dataTarget(t *testing.T, dir string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(dir, dataDirName))
	require.NoError(t, err)
	return target
}

func TestWriteAtomicallyUsesKubeletLayout(t *testing.T) {
	dir := t.TempDir()
	changed, err := writeAtomically(dir, map[string]volumeFile{
		"tls.crt":      {data: []byte("cert"), mode: 0o644},
		"nested/a.txt": {data: []byte("a"), mode: 0o400},
	})
	require.NoError(t, err, "first write: changed=%v err=%v", changed, err)
	require.True(t, changed, "first write: changed=%v err=%v", changed, err)
	ts := dataTarget(t, dir)
	require.True(t, strings.HasPrefix(ts, ".."), "..data points at %q, want a sibling timestamped dir", ts)
	require.NotContains(t, ts, "/", "..data points at %q, want a sibling timestamped dir", ts)
	for name, want := range map[string]string{"tls.crt": "..data/tls.crt", "nested": "..data/nested"} {
		got, err := os.Readlink(filepath.Join(dir, name))
		require.NoError(t, err, "user-visible %s -> %q (%v), want -> %q", name, got, err, want)
		assert.Equal(t, want, got, "user-visible %s -> %q (%v), want -> %q", name, got, err, want)
	}
	got := readVolumeFile(t, dir, "nested/a.txt")
	require.Equal(t, "a", got, "nested/a.txt = %q", got)
	info, err := os.Stat(filepath.Join(dir, ts, "nested", "a.txt"))
	require.NoError(t, err, "mode of nested/a.txt")
	require.Equal(t, fs.FileMode(0o400), info.Mode().Perm(), "mode of nested/a.txt = %v, want 0400", info.Mode().Perm())
}

func TestWriteAtomicallySwapsDataAndDropsOldFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := writeAtomically(dir, map[string]volumeFile{
		"tls.crt": {data: []byte("old"), mode: 0o644},
		"gone":    {data: []byte("x"), mode: 0o644},
	})
	require.NoError(t, err)
	first := dataTarget(t, dir)
	changed, err := writeAtomically(dir, map[string]volumeFile{"tls.crt": {data: []byte("new"), mode: 0o644}})
	require.NoError(t, err, "update: changed=%v err=%v", changed, err)
	require.True(t, changed, "update: changed=%v err=%v", changed, err)
	second := dataTarget(t, dir)
	require.NotEqual(t, first, second, "..data still points at %s after an update", first)
	got := readVolumeFile(t, dir, "tls.crt")
	require.Equal(t, "new", got, "tls.crt = %q after update", got)
	for _, name := range []string{"gone", first, newDataDirName} {
		_, err := os.Lstat(filepath.Join(dir, name))
		assert.True(t, os.IsNotExist(err), "%s still exists after the update (err %v)", name, err)
	}
}

func TestWriteAtomicallyLeavesAnUnchangedPayloadAlone(t *testing.T) {
	dir := t.TempDir()
	payload := map[string]volumeFile{"k": {data: []byte("v"), mode: 0o644}}
	_, err := writeAtomically(dir, payload)
	require.NoError(t, err)
	first := dataTarget(t, dir)
	changed, err := writeAtomically(dir, payload)
	require.NoError(t, err, "same payload: changed=%v err=%v, want no change", changed, err)
	require.False(t, changed, "same payload: changed=%v err=%v, want no change", changed, err)
	got := dataTarget(t, dir)
	require.Equal(t, first, got, "..data moved from %s to %s for an identical payload", first, got)
	// A mode change alone is a change.
	changed, err = writeAtomically(dir, map[string]volumeFile{"k": {data: []byte("v"), mode: 0o600}})
	require.NoError(t, err, "mode change: changed=%v err=%v", changed, err)
	require.True(t, changed, "mode change: changed=%v err=%v", changed, err)
}

func TestWriteAtomicallyEmptyPayloadStillPublishesData(t *testing.T) {
	dir := t.TempDir()
	_, err := writeAtomically(dir, map[string]volumeFile{})
	require.NoError(t, err)
	entries, _ := os.ReadDir(dir)
	// ..data and its timestamped dir
	require.Len(t, entries, 2, "empty volume holds %d entries, want ..data and one timestamped dir", len(entries))
}

func TestWriteAtomicallyRejectsEscapingPaths(t *testing.T) {
	for _, p := range []string{"../etc/passwd", "/abs", "a/../../b", "..data", ""} {
		_, err := writeAtomically(t.TempDir(), map[string]volumeFile{p: {data: nil, mode: 0o644}})
		require.Error(t, err, "payload path %q accepted", p)
	}
}
