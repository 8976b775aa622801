package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

func serveProbes(t *testing.T, readTimeout time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := newProbeServer(map[string]healthz.Checker{"ping": healthz.Ping},
		map[string]healthz.Checker{"ready": healthz.Ping, "broken": func(*http.Request) error { return errors.New("not yet") }}, readTimeout)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func TestProbeServerServesTheChecks(t *testing.T) {
	addr := serveProbes(t, time.Second)
	for path, want := range map[string]int{
		"/healthz": http.StatusOK, "/healthz/ping": http.StatusOK,
		"/readyz": http.StatusInternalServerError, "/readyz/ready": http.StatusOK, "/readyz/broken": http.StatusInternalServerError,
		"/metrics": http.StatusNotFound,
	} {
		resp, err := http.Get("http://" + addr + path) //nolint:noctx // a probe, as the kubelet's
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, path)
	}
}

// A client that sends its headers and then trickles a body, or never ends its headers, is cut
// off once the read timeout passes (controller-runtime's probe server held the first forever).
func TestProbeServerCutsOffSlowClients(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr := serveProbes(t, timeout)
	for name, head := range map[string]string{
		"slow body":    "POST /healthz HTTP/1.1\r\nHost: p\r\nContent-Length: 1000\r\n\r\n",
		"slow headers": "GET /healthz HTTP/1.1\r\nHost: p\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer func() { _ = conn.Close() }()
			_, err = io.WriteString(conn, head)
			require.NoError(t, err)
			go func() {
				for i := 0; ; i++ {
					time.Sleep(50 * time.Millisecond)
					if _, err := fmt.Fprintf(conn, "X-%d: y\r\n", i); err != nil {
						return
					}
				}
			}()
			start := time.Now()
			_ = conn.SetReadDeadline(start.Add(5 * time.Second))
			_, _ = io.Copy(io.Discard, bufio.NewReader(conn))
			assert.Less(t, time.Since(start), timeout+2*time.Second, "the connection was held for %s", time.Since(start))
		})
	}
}
