package certs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func touch(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte("x"), 0o600))
}

func TestResolveServingFiles(t *testing.T) {
	cases := []struct {
		name     string
		present  []string // relative to a root holding certs/ and olm/
		wantCert string
		wantKey  string
	}{
		{"kubernetes.io/tls names", []string{"certs/tls.crt", "certs/tls.key"}, "certs/tls.crt", "certs/tls.key"},
		{"OLM tls.cert rename", []string{"certs/tls.cert", "certs/tls.key"}, "certs/tls.cert", "certs/tls.key"},
		{"tls.crt preferred over tls.cert", []string{"certs/tls.cert", "certs/tls.crt", "certs/tls.key"}, "certs/tls.crt", "certs/tls.key"},
		{"OLM apiserver directory", []string{"olm/apiserver.crt", "olm/apiserver.key"}, "olm/apiserver.crt", "olm/apiserver.key"},
		{"cert dir preferred over OLM directory", []string{"certs/tls.crt", "certs/tls.key", "olm/apiserver.crt", "olm/apiserver.key"}, "certs/tls.crt", "certs/tls.key"},
		{"incomplete pair skipped", []string{"certs/tls.crt", "olm/apiserver.crt", "olm/apiserver.key"}, "olm/apiserver.crt", "olm/apiserver.key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, p := range tc.present {
				touch(t, filepath.Join(root, p))
			}
			got, err := ResolveServingFiles(filepath.Join(root, "certs"), filepath.Join(root, "olm"))
			require.NoError(t, err)
			want := ServingFiles{filepath.Join(root, tc.wantCert), filepath.Join(root, tc.wantKey)}
			assert.Equal(t, want, got, "got %+v, want %+v", got, want)
		})
	}

	t.Run("kubelet Secret volume layout (symlinks)", func(t *testing.T) {
		dir := t.TempDir()
		touch(t, filepath.Join(dir, "..2026_01_01", "tls.crt"))
		touch(t, filepath.Join(dir, "..2026_01_01", "tls.key"))
		mustSymlink(t, "..2026_01_01", filepath.Join(dir, "..data"))
		mustSymlink(t, "..data/tls.crt", filepath.Join(dir, "tls.crt"))
		mustSymlink(t, "..data/tls.key", filepath.Join(dir, "tls.key"))
		got, err := ResolveServingFiles(dir, "")
		require.NoError(t, err)
		assert.Equal(t, got.CertFile, filepath.Join(dir, "tls.crt"), "got %+v", got)
	})

	t.Run("nothing mounted names every place looked at", func(t *testing.T) {
		root := t.TempDir()
		_, err := ResolveServingFiles(filepath.Join(root, "certs"), filepath.Join(root, "olm"))
		require.Error(t, err, "resolved nothing without error")
		for _, p := range []string{"certs/tls.crt", "certs/tls.cert", "certs/tls.key", "olm/apiserver.crt", "olm/apiserver.key"} {
			assert.Contains(t, err.Error(), filepath.Join(root, p), "error %q does not mention %s", err, p)
		}
	})
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	require.NoError(t, os.Symlink(target, link))
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path) //nolint:gosec // G304: tests pass paths under their t.TempDir()
	require.NoError(t, err)
	return string(b)
}

func TestWriteFilesAtomically(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "serving-certs")
	v1 := map[string][]byte{"tls.crt": []byte("cert-1"), "tls.key": []byte("key-1")}

	changed, err := writeFilesAtomically(dir, v1)
	require.NoError(t, err, "first write")
	require.True(t, changed, "first write: changed=%v, want true", changed)
	got := readString(t, filepath.Join(dir, "tls.crt"))
	assert.Equal(t, "cert-1", got, "tls.crt = %q", got)
	fi, err := os.Stat(filepath.Join(dir, "tls.key"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm(), "tls.key mode %v, want 0600", fi.Mode().Perm())

	changed, err = writeFilesAtomically(dir, v1)
	require.NoError(t, err, "identical rewrite")
	assert.False(t, changed, "identical rewrite: changed=%v, want false", changed)

	t.Run("replaces regular files left by someone else", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("old"), 0o600))
		_, err := writeFilesAtomically(dir, v1)
		require.NoError(t, err)
		got := readString(t, filepath.Join(dir, "tls.crt"))
		assert.Equal(t, "cert-1", got, "tls.crt = %q", got)
	})

	t.Run("readers never see partial content and old versions are cleaned up", func(t *testing.T) {
		// Large contents make a torn write likely to be seen if writes weren't atomic.
		versions := make([]map[string][]byte, 20)
		valid := map[string]bool{}
		for i := range versions {
			c := bytes.Repeat([]byte(fmt.Sprintf("cert-%02d|", i)), 20000)
			k := bytes.Repeat([]byte(fmt.Sprintf("key-%02d|", i)), 20000)
			versions[i] = map[string][]byte{"tls.crt": c, "tls.key": k}
			valid[string(c)], valid[string(k)] = true, true
		}
		_, err := writeFilesAtomically(dir, versions[0])
		require.NoError(t, err)
		var stop atomic.Bool
		var reads, bad atomic.Int64
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for !stop.Load() {
					for _, name := range []string{"tls.crt", "tls.key"} {
						b, err := os.ReadFile(filepath.Join(dir, name)) //nolint:gosec // G304: a fixed name under the test's t.TempDir()
						reads.Add(1)
						// A reader resolving the old directory just as it is removed gets
						// ENOENT (as with kubelet's Secret volumes) and reads again; what it
						// must never get is a mix of two versions.
						if errors.Is(err, fs.ErrNotExist) {
							continue
						}
						if err != nil || !valid[string(b)] {
							bad.Add(1)
						}
					}
				}
			})
		}
		for i := 1; i < len(versions); i++ {
			_, err := writeFilesAtomically(dir, versions[i])
			require.NoError(t, err)
		}
		stop.Store(true)
		wg.Wait()
		assert.Equal(t, int64(0), bad.Load(), "%d of %d reads saw a missing or partial file", bad.Load(), reads.Load())
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		// ..certs_<x>, ..data, tls.crt, tls.key
		assert.Len(t, names, 4, "directory holds %v, want one staging dir, ..data and the two files", names)
		got := readString(t, filepath.Join(dir, "tls.key"))
		assert.Equal(t, string(versions[len(versions)-1]["tls.key"]), got, "tls.key is not the last version written")
	})
}
