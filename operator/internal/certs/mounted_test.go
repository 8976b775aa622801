package certs

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mount publishes a bundle the way kubelet updates a Secret volume (atomic ..data swap),
// under the given file names.
func mount(t *testing.T, dir string, b *servingBundle, certName, keyName string) {
	t.Helper()
	_, err := writeFilesAtomically(dir, map[string][]byte{certName: b.certPEM, keyName: b.keyPEM, keyCACert: b.caPEM})
	must(t, err)
}

func mountedController(t *testing.T, mode Mode, certDir, olmDir string) (*Controller, *logRecorder) {
	t.Helper()
	logs, log := newLogRecorder(t)
	c, err := New(nil, Options{Mode: mode, Namespace: "dynamo-system", SecretName: "webhook-server-cert", CertDir: certDir, OLMCertDir: olmDir}, log) //nolint:gosec // G101: the name of a Kubernetes Secret, not a credential
	must(t, err)
	return c, logs
}

func TestMountedModes(t *testing.T) {
	o := testOptions()
	host := o.serviceHost()

	for _, mode := range []Mode{ModeExternal, ModeCertManager} {
		t.Run(fmt.Sprintf("%s: waits for the mount, serves it, reloads renewals without restart", mode), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "serving-certs")
			c, logs := mountedController(t, mode, dir, filepath.Join(t.TempDir(), "olm"))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			booted := make(chan error, 1)
			go func() { booted <- c.Bootstrap(ctx) }()

			eventually(t, 5*time.Second, "wait logged", func() error {
				_, err := logs.line("waiting for the webhook serving certificate", dir, "webhook-server-cert")
				return err
			})
			select {
			case err := <-booted:
				require.Failf(t, "Bootstrap returned before anything was mounted", "Bootstrap returned %v", err)
			default:
			}
			err := c.ReadyCheck(nil)
			require.Error(t, err, "ready without a certificate")

			first := mustGenerate(t, o)
			mount(t, dir, first, "tls.crt", "tls.key")
			select {
			case err := <-booted:
				must(t, err)
			case <-time.After(10 * time.Second):
				require.Fail(t, "Bootstrap did not notice the mounted certificate")
			}
			must(t, c.ReadyCheck(nil))
			start(t, c)
			addr := tlsServer(t, c)
			must(t, servesCertificate(addr, host, first.caPEM, first.leaf))

			// A renewal with a different lifetime, so the expiry metric tells them apart.
			renewed := o
			renewed.ServerValidity = 400 * 24 * time.Hour
			second := mustGenerate(t, renewed)
			mount(t, dir, second, "tls.crt", "tls.key")
			eventually(t, 15*time.Second, "renewed certificate served", func() error {
				return servesCertificate(addr, host, second.caPEM, second.leaf)
			})
			eventually(t, 5*time.Second, "expiry metric follows the renewal", func() error {
				if v := gaugeValue(t); v != float64(second.leaf.NotAfter.Unix()) {
					return fmt.Errorf("metric %v, want %d", v, second.leaf.NotAfter.Unix())
				}
				return nil
			})
		})
	}

	t.Run("C10 OLM-style tls.cert/tls.key are served", func(t *testing.T) {
		dir := t.TempDir()
		b := mustGenerate(t, o)
		mount(t, dir, b, "tls.cert", "tls.key")
		c, _ := mountedController(t, ModeExternal, dir, filepath.Join(t.TempDir(), "olm"))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		must(t, c.Bootstrap(ctx))
		got := c.ServingFiles().CertFile
		assert.Equal(t, filepath.Join(dir, "tls.cert"), got, "serving %s", got)
		_, err := served(tlsServer(t, c), host, b.caPEM)
		must(t, err)
	})

	t.Run("C10 OLM apiserver certificate directory is served", func(t *testing.T) {
		olm := t.TempDir()
		b := mustGenerate(t, o)
		mount(t, olm, b, "apiserver.crt", "apiserver.key")
		c, _ := mountedController(t, ModeExternal, filepath.Join(t.TempDir(), "empty"), olm)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		must(t, c.Bootstrap(ctx))
		_, err := served(tlsServer(t, c), host, b.caPEM)
		must(t, err)
	})

	t.Run("a mismatched mount is not served and the wait says why", func(t *testing.T) {
		dir := t.TempDir()
		a, b := mustGenerate(t, o), mustGenerate(t, o)
		_, err := writeFilesAtomically(dir, map[string][]byte{"tls.crt": a.certPEM, "tls.key": b.keyPEM})
		must(t, err)
		c, logs := mountedController(t, ModeCertManager, dir, "")
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		err = c.Bootstrap(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded, "Bootstrap: want a deadline error explaining the key mismatch")
		require.ErrorContains(t, err, "private key does not match", "Bootstrap: want a deadline error explaining the key mismatch")
		assertNoKeyMaterial(t, err.Error()+strings.Join(logs.all(), "\n"), a.keyPEM, b.keyPEM)
	})

	t.Run("Bootstrap stops waiting when its context is cancelled", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "never-mounted")
		c, _ := mountedController(t, ModeExternal, dir, "")
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		err := c.Bootstrap(ctx)
		require.ErrorIs(t, err, context.Canceled, "Bootstrap: want a cancellation naming %s", dir)
		require.ErrorContains(t, err, dir, "Bootstrap: want a cancellation naming %s", dir)
		err = c.Start(context.Background())
		require.Error(t, err, "Start without a loaded certificate succeeded")
	})
}
