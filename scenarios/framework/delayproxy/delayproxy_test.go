package delayproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// upstream is a real TCP server that echoes what it reads, prefixed by a greeting it sends
// first (so bytes flow server to client before the client writes); it counts connections.
type upstream struct {
	l     net.Listener
	mu    sync.Mutex
	conns int
}

const greeting = "hello from upstream\n"

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u := &upstream{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns++
			u.mu.Unlock()
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.WriteString(c, greeting)
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return u
}

func (u *upstream) addr() string { return u.l.Addr().String() }

func (u *upstream) accepted() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conns
}

// start serves p on a loopback port until the returned stop is called; stop returns Serve's error.
func start(t *testing.T, p *Proxy) (addr string, stop func() error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, l) }()
	var once sync.Once
	var serveErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case serveErr = <-done:
			case <-time.After(5 * time.Second):
				t.Error("Serve did not return within 5s of its context's end")
			}
		})
		return serveErr
	}
	t.Cleanup(func() { _ = stop() })
	return l.Addr().String(), stop
}

func TestBytesPassUnchangedBothWaysTheClientsDelayed(t *testing.T) {
	u := newUpstream(t)
	delay := 300 * time.Millisecond
	addr, _ := start(t, &Proxy{Delay: delay, Upstreams: []string{u.addr()}})
	payload := make([]byte, 256<<10)
	_, err := rand.Read(payload)
	require.NoError(t, err)

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	hello := make([]byte, len(greeting))
	_, err = io.ReadFull(c, hello)
	require.NoError(t, err)
	assert.Equal(t, greeting, string(hello), "the upstream's answers come back at once")
	sent := time.Now()
	go func() { _, _ = c.Write(payload) }()
	got := make([]byte, len(payload))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(sent), delay, "the echo came back before the client's bytes were delayed")
	assert.True(t, bytes.Equal(payload, got), "the echo of %d random bytes came back altered", len(payload))
}

// A webhook behind the proxy must be slow for every call, also on a connection the API server
// keeps alive: were only the start of a connection delayed, a connection whose handshake the
// client gave up on but completed later would answer every later request at once.
func TestEveryBurstOnAConnectionKeptAliveMeetsTheDelay(t *testing.T) {
	u := newUpstream(t)
	delay := 300 * time.Millisecond
	addr, _ := start(t, &Proxy{Delay: delay, Upstreams: []string{u.addr()}})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	_, err = io.ReadFull(c, make([]byte, len(greeting)))
	require.NoError(t, err)
	for _, request := range []string{"first request", "second request", "third request"} {
		sent := time.Now()
		_, err := io.WriteString(c, request)
		require.NoError(t, err)
		got := make([]byte, len(request))
		_, err = io.ReadFull(c, got)
		require.NoError(t, err)
		assert.Equal(t, request, string(got))
		assert.GreaterOrEqual(t, time.Since(sent), delay, "%q was answered sooner than the delay on a connection already in use", request)
	}
}

func TestNoByteReachesTheUpstreamBeforeItsDelay(t *testing.T) {
	u := newUpstream(t)
	addr, _ := start(t, &Proxy{Delay: time.Second, Upstreams: []string{u.addr()}})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	_, err = io.ReadFull(c, make([]byte, len(greeting)))
	require.NoError(t, err)
	_, err = io.WriteString(c, "x")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(500*time.Millisecond)))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	require.ErrorAs(t, err, &ne, "half the delay in, the upstream already echoed the byte")
	assert.True(t, ne.Timeout())
}

func TestStopClosesEveryConnectionAndWhatItStillHolds(t *testing.T) {
	u := newUpstream(t)
	proxy := &Proxy{Delay: time.Hour, Upstreams: []string{u.addr()}}
	addr, stop := start(t, proxy)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	_, err = io.ReadFull(c, make([]byte, len(greeting)))
	require.NoError(t, err, "the connection was not forwarded")
	_, err = io.WriteString(c, "held for an hour")
	require.NoError(t, err)

	require.NoError(t, stop())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Second)))
	_, err = c.Read(make([]byte, 1))
	// The proxy closes with the client's bytes unread, which the kernel answers with a reset.
	assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET), "the connection was not closed when the proxy stopped: %v", err)
	_, err = net.DialTimeout("tcp", addr, time.Second)
	assert.Error(t, err, "the proxy still accepts after it stopped")
}

func TestAnUpstreamThatRefusesIsSkipped(t *testing.T) {
	u := newUpstream(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusing := closed.Addr().String()
	require.NoError(t, closed.Close())
	addr, _ := start(t, &Proxy{Delay: time.Millisecond, Upstreams: []string{refusing, u.addr()}})
	for range 2 { // each connection starts at another upstream: both meet the refusing one first once
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = io.ReadFull(c, make([]byte, len(greeting)))
		require.NoError(t, err)
		_ = c.Close()
	}
	assert.Equal(t, 2, u.accepted())
}

func TestServeWithoutUpstreamsRefuses(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	assert.ErrorContains(t, (&Proxy{Delay: time.Second}).Serve(t.Context(), l), "no upstream")
}
