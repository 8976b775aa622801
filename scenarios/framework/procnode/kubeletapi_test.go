package procnode

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteTailKeepsTheLastLines(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeTail(&b, strings.NewReader("1\n2\n3\n4"), 2))
	require.Equal(t, "3\n4", b.String(), "tail 2 = %q", b.String())
	b.Reset()
	err := writeTail(&b, strings.NewReader("1\n2\n"), 0)
	require.NoError(t, err, "tail 0 = %q, %v", b.String(), err)
	require.Zero(t, b.Len(), "tail 0 = %q, %v", b.String(), err)
}

func TestLogRunsOrdersByRestartNumber(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"10.log", "2.log", "0.log", "notes.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o600))
	}
	got := logRuns(dir)
	want := []string{filepath.Join(dir, "0.log"), filepath.Join(dir, "2.log"), filepath.Join(dir, "10.log")}
	require.True(t, slices.Equal(got, want), "logRuns = %q, want %q", got, want)
}

func TestLimitWriterStopsAtTheLimit(t *testing.T) {
	var b bytes.Buffer
	w := &limitWriter{w: &b, left: 5}
	_, _ = w.Write([]byte("abc"))
	_, _ = w.Write([]byte("defg"))
	_, err := w.Write([]byte("h"))
	require.Error(t, err, "write past the limit succeeded")
	require.Equal(t, "abcde", b.String(), "limited output = %q", b.String())
}
