package certs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ServingFiles are the certificate and key files the webhook server serves.
type ServingFiles struct {
	CertFile, KeyFile string
}

// servingFileCandidates lists, in order of preference, the layouts a certificate can be
// mounted in: a kubernetes.io/tls Secret (tls.crt), OLM's rename of it (tls.cert), and OLM's
// own apiserver certificate directory.
func servingFileCandidates(certDir, olmDir string) []ServingFiles {
	c := []ServingFiles{
		{filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key")},
		{filepath.Join(certDir, "tls.cert"), filepath.Join(certDir, "tls.key")},
	}
	if olmDir != "" {
		c = append(c, ServingFiles{filepath.Join(olmDir, "apiserver.crt"), filepath.Join(olmDir, "apiserver.key")})
	}
	return c
}

// ResolveServingFiles finds the first mounted certificate/key pair in certDir (tls.crt, then
// tls.cert, each with tls.key) or olmDir (apiserver.crt/apiserver.key). Both files of a pair
// must be present; symlinks (Secret volumes) are followed. The error lists every place looked at.
func ResolveServingFiles(certDir, olmDir string) (ServingFiles, error) {
	candidates := servingFileCandidates(certDir, olmDir)
	looked := make([]string, 0, len(candidates))
	for _, c := range candidates {
		if isFile(c.CertFile) && isFile(c.KeyFile) {
			return c, nil
		}
		looked = append(looked, c.CertFile+" + "+c.KeyFile)
	}
	return ServingFiles{}, fmt.Errorf("no webhook serving certificate found; looked for %s", strings.Join(looked, ", "))
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// dataLink is the symlink whose swap publishes a new set of files, the way kubelet updates
// Secret volumes: both files change in one rename, and certwatcher sees the old files
// removed and re-reads the pair by name.
const dataLink = "..data"

// writeFilesAtomically publishes files (name → content) in dir so a reader sees either the
// old or the new content of each file, never a partial write. Only the operator itself reads
// the files, so directories are 0700 and files 0600. It reports whether anything changed.
func writeFilesAtomically(dir string, files map[string][]byte) (bool, error) {
	if same(dir, files) {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("creating directory %s: %w", dir, err)
	}
	tsDir, err := os.MkdirTemp(dir, "..certs_")
	if err != nil {
		return false, fmt.Errorf("creating a staging directory in %s: %w", dir, err)
	}
	published := false
	defer func() {
		if !published {
			_ = os.RemoveAll(tsDir)
		}
	}()
	// os.MkdirTemp created tsDir 0700.
	for name, content := range files {
		if err := writeSynced(filepath.Join(tsDir, name), content, 0o600); err != nil {
			return false, err
		}
	}

	oldTarget, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("reading symlink %s: %w", filepath.Join(dir, dataLink), err)
	}
	if err := replaceWithSymlink(filepath.Join(dir, dataLink), filepath.Base(tsDir)); err != nil {
		return false, err
	}
	published = true
	for name := range files {
		target := filepath.Join(dataLink, name)
		link := filepath.Join(dir, name)
		if current, err := os.Readlink(link); err == nil && current == target {
			continue
		}
		// A regular file (or a link elsewhere) is replaced by a rename too, so the name
		// never disappears.
		if err := replaceWithSymlink(link, target); err != nil {
			return true, err
		}
	}
	if oldTarget != "" && oldTarget != filepath.Base(tsDir) {
		if err := os.RemoveAll(filepath.Join(dir, oldTarget)); err != nil {
			return true, fmt.Errorf("removing previous certificate directory %s: %w", filepath.Join(dir, oldTarget), err)
		}
	}
	return true, nil
}

// same reports whether every file already has the wanted content.
func same(dir string, files map[string][]byte) bool {
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name)) //nolint:gosec // G304: the operator's own certificate directory and a fixed file name
		if err != nil || !bytes.Equal(got, want) {
			return false
		}
	}
	return true
}

func writeSynced(path string, content []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode) //nolint:gosec // G304: a fixed file name in the staging directory writeFilesAtomically created
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if _, err := f.Write(content); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", path, err)
	}
	return nil
}

// replaceWithSymlink points link at target with a rename, atomic on POSIX file systems.
func replaceWithSymlink(link, target string) error {
	tmp := link + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale %s: %w", tmp, err)
	}
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("creating symlink %s -> %s: %w", tmp, target, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("renaming %s to %s: %w", tmp, link, err)
	}
	return nil
}
