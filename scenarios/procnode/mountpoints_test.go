package procnode

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMountpointsRemoveOnlyWhatTheyCreated(t *testing.T) {
	root := t.TempDir()
	existing := filepath.Join(root, "etc")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	m := newMountpoints("")
	a, err := m.ensure(filepath.Join(existing, "op", "certs"), false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.ensure(filepath.Join(existing, "op", "config.yaml"), true)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(existing, "op", "config.yaml")); err != nil || info.IsDir() {
		t.Fatalf("file mount target not created as a file: %v", err)
	}
	m.release(a)
	if _, err := os.Stat(filepath.Join(existing, "op", "certs")); !os.IsNotExist(err) {
		t.Fatal("released mount dir still exists")
	}
	if _, err := os.Stat(filepath.Join(existing, "op")); err != nil {
		t.Fatal("a parent still held by another mount was removed")
	}
	m.release(b)
	if _, err := os.Stat(filepath.Join(existing, "op")); !os.IsNotExist(err) {
		t.Fatal("created parent not removed once nobody holds it")
	}
	if _, err := os.Stat(existing); err != nil {
		t.Fatal("a pre-existing directory was removed")
	}
}

func TestMountpointsKeepDirectoriesSomebodyFilled(t *testing.T) {
	root := t.TempDir()
	m := newMountpoints("")
	held, err := m.ensure(filepath.Join(root, "work"), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "work", "out.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.release(held)
	if _, err := os.Stat(filepath.Join(root, "work", "out.txt")); err != nil {
		t.Fatal("a directory holding files was removed")
	}
}

func TestMountpointsJournalLetsTheNextRunCleanUp(t *testing.T) {
	root := t.TempDir()
	journal := filepath.Join(root, "mountpoints")
	m := newMountpoints(journal)
	if _, err := m.ensure(filepath.Join(root, "a", "b"), false); err != nil {
		t.Fatal(err)
	}
	// The node is killed here: nothing is released. The next start cleans up.
	removeJournaled(journal)
	for _, p := range []string{filepath.Join(root, "a"), journal} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived the journal cleanup", p)
		}
	}
}
