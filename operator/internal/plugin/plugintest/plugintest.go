// Package plugintest holds what the kubectl plugins' tests share.
package plugintest

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// UnreachableKubeconfig writes a kubeconfig whose API server refuses connections. Its current
// context, "other", sets namespace "elsewhere"; context "gone" sets none.
func UnreachableKubeconfig(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters:
- name: gone
  cluster: {server: "https://`+addr+`", insecure-skip-tls-verify: true}
users:
- name: someone
  user: {token: not-a-real-token}
contexts:
- name: gone
  context: {cluster: gone, user: someone}
- name: other
  context: {cluster: gone, user: someone, namespace: elsewhere}
current-context: other
`), 0o600))
	return path
}
