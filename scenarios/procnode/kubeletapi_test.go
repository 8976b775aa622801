package procnode

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestWriteTailKeepsTheLastLines(t *testing.T) {
	var b bytes.Buffer
	if err := writeTail(&b, strings.NewReader("1\n2\n3\n4"), 2); err != nil {
		t.Fatal(err)
	}
	if b.String() != "3\n4" {
		t.Fatalf("tail 2 = %q", b.String())
	}
	b.Reset()
	if err := writeTail(&b, strings.NewReader("1\n2\n"), 0); err != nil || b.Len() != 0 {
		t.Fatalf("tail 0 = %q, %v", b.String(), err)
	}
}

func TestLogRunsOrdersByRestartNumber(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"10.log", "2.log", "0.log", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := logRuns(dir)
	want := []string{filepath.Join(dir, "0.log"), filepath.Join(dir, "2.log"), filepath.Join(dir, "10.log")}
	if !slices.Equal(got, want) {
		t.Fatalf("logRuns = %q, want %q", got, want)
	}
}

func TestLimitWriterStopsAtTheLimit(t *testing.T) {
	var b bytes.Buffer
	w := &limitWriter{w: &b, left: 5}
	_, _ = w.Write([]byte("abc"))
	_, _ = w.Write([]byte("defg"))
	if _, err := w.Write([]byte("h")); err == nil {
		t.Fatal("write past the limit succeeded")
	}
	if b.String() != "abcde" {
		t.Fatalf("limited output = %q", b.String())
	}
}
