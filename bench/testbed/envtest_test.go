package testbed

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// keyMaterial lists what under dir is, or holds, key material: a private key (the operator's
// tls.key), a kubeconfig with client credentials, or a serving-certificate directory.
func keyMaterial(dir string) ([]string, error) {
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch name := d.Name(); {
		case d.IsDir() && name == "serving-certs", name == "kubeconfig", name == "tls.key":
			found = append(found, path)
			return nil
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(path) //nolint:gosec // G304: a file under the test's own directory
		if err != nil {
			return err
		}
		for _, secret := range []string{"PRIVATE KEY", "client-key-data", "token:"} {
			if bytes.Contains(b, []byte(secret)) {
				found = append(found, fmt.Sprintf("%s (contains %q)", path, secret))
			}
		}
		return nil
	})
	return found, err
}

// TestEnvtestKeepsKeyMaterialOutOfTheWorkDir: the work directory is the run's output
// (_output/bench/<run>/), which users attach to bug reports; the operator's serving key and the
// admin kubeconfig live elsewhere, privately, and are gone after Close (issue 15, finding 7).
func TestEnvtestKeepsKeyMaterialOutOfTheWorkDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and the operator")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	work := t.TempDir()
	tb, err := StartEnvtest(ctx, EnvtestOptions{WorkDir: work, Progress: logWriter{t}})
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = tb.Close(context.Background())
		}
	})

	found, err := keyMaterial(work)
	require.NoError(t, err)
	assert.Empty(t, found, "key material in the work directory %s while the operator runs", work)
	assert.FileExists(t, filepath.Join(work, "operator.log"))

	require.NotEmpty(t, tb.secretsDir)
	assert.FileExists(t, filepath.Join(tb.secretsDir, "serving-certs", "tls.key"), "the operator serves from the private directory")
	assert.FileExists(t, filepath.Join(tb.secretsDir, "kubeconfig"))
	info, err := os.Stat(tb.secretsDir)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o700), info.Mode().Perm(), "the private directory is the user's alone")

	require.NoError(t, tb.Close(ctx))
	closed = true
	assert.NoDirExists(t, tb.secretsDir, "Close removes the kubeconfig and the serving key")
	found, err = keyMaterial(work)
	require.NoError(t, err)
	assert.Empty(t, found, "key material in the work directory %s after Close", work)
}
