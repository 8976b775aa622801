package certs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
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
			if err != nil {
				t.Fatal(err)
			}
			want := ServingFiles{filepath.Join(root, tc.wantCert), filepath.Join(root, tc.wantKey)}
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
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
		if err != nil {
			t.Fatal(err)
		}
		if got.CertFile != filepath.Join(dir, "tls.crt") {
			t.Errorf("got %+v", got)
		}
	})

	t.Run("nothing mounted names every place looked at", func(t *testing.T) {
		root := t.TempDir()
		_, err := ResolveServingFiles(filepath.Join(root, "certs"), filepath.Join(root, "olm"))
		if err == nil {
			t.Fatal("resolved nothing without error")
		}
		for _, p := range []string{"certs/tls.crt", "certs/tls.cert", "certs/tls.key", "olm/apiserver.crt", "olm/apiserver.key"} {
			if !strings.Contains(err.Error(), filepath.Join(root, p)) {
				t.Errorf("error %q does not mention %s", err, p)
			}
		}
	})
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path) //nolint:gosec // G304: tests pass paths under their t.TempDir()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteFilesAtomically(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "serving-certs")
	v1 := map[string][]byte{"tls.crt": []byte("cert-1"), "tls.key": []byte("key-1")}

	changed, err := writeFilesAtomically(dir, v1)
	if err != nil || !changed {
		t.Fatalf("first write: changed=%v err=%v", changed, err)
	}
	if got := readString(t, filepath.Join(dir, "tls.crt")); got != "cert-1" {
		t.Errorf("tls.crt = %q", got)
	}
	fi, err := os.Stat(filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key mode %v, want 0600", fi.Mode().Perm())
	}

	changed, err = writeFilesAtomically(dir, v1)
	if err != nil || changed {
		t.Errorf("identical rewrite: changed=%v err=%v", changed, err)
	}

	t.Run("replaces regular files left by someone else", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := writeFilesAtomically(dir, v1); err != nil {
			t.Fatal(err)
		}
		if got := readString(t, filepath.Join(dir, "tls.crt")); got != "cert-1" {
			t.Errorf("tls.crt = %q", got)
		}
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
		if _, err := writeFilesAtomically(dir, versions[0]); err != nil {
			t.Fatal(err)
		}
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
			if _, err := writeFilesAtomically(dir, versions[i]); err != nil {
				t.Fatal(err)
			}
		}
		stop.Store(true)
		wg.Wait()
		if bad.Load() != 0 {
			t.Errorf("%d of %d reads saw a missing or partial file", bad.Load(), reads.Load())
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(names) != 4 { // ..certs_<x>, ..data, tls.crt, tls.key
			t.Errorf("directory holds %v, want one staging dir, ..data and the two files", names)
		}
		if got := readString(t, filepath.Join(dir, "tls.key")); got != string(versions[len(versions)-1]["tls.key"]) {
			t.Error("tls.key is not the last version written")
		}
	})
}
