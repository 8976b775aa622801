// Package delayproxy is a TCP proxy that holds every connection it accepts for a delay before
// it forwards the connection's bytes, unchanged and both ways, to one of its upstreams. Put in
// front of a webhook server (the webhook Service's selector pointed at its pods), it makes the
// webhook slower than the API server's timeoutSeconds without touching the operator: TLS passes
// through untouched, so the served certificate and its SAN are the server's own.
package delayproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards connections after Delay to the first of Upstreams that accepts, trying them
// in turn from one connection to the next.
type Proxy struct {
	// Delay is how long each accepted connection waits before it is forwarded.
	Delay time.Duration
	// Upstreams are the host:port addresses forwarded to.
	Upstreams []string
	// DialTimeout bounds each connection to an upstream (default 5s).
	DialTimeout time.Duration
	// Logf hears what happened to each connection (nil: nothing is logged).
	Logf func(format string, args ...any)

	mu       sync.Mutex
	next     int
	conns    map[net.Conn]struct{}
	stopping bool
}

// Serve accepts connections on l until ctx is done, then closes l and every connection it
// holds or forwards (waiting or not) and returns once their goroutines have ended.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	if len(p.Upstreams) == 0 {
		return errors.New("delay proxy: no upstream to forward to")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	stopped := make(chan struct{})
	go func() {
		<-ctx.Done()
		_ = l.Close() // ends Accept
		p.closeAll()
		close(stopped)
	}()
	var err error
	for {
		var c net.Conn
		c, err = l.Accept()
		if err != nil {
			break
		}
		if !p.track(c) {
			_ = c.Close() // accepted as Serve stops
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.handle(ctx, c)
		}()
	}
	cancel()
	<-stopped
	wg.Wait()
	if ctx.Err() != nil && errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("delay proxy: accepting on %s: %w", l.Addr(), err)
}

// handle holds c for the delay, then forwards it to an upstream until either side closes.
func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	defer p.untrack(c)
	from := c.RemoteAddr().String()
	select {
	case <-ctx.Done():
		p.logf("%s: closed while held (stopping)", from)
		return
	case <-time.After(p.Delay):
	}
	up, addr, err := p.dial(ctx)
	if err != nil {
		p.logf("%s: held %s, then %v", from, p.Delay, err)
		return
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	p.logf("%s: held %s, forwarding to %s", from, p.Delay, addr)
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		// One direction ended: tell the other side, which may still answer (half close).
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	go pipe(up, c)
	go pipe(c, up)
	wg.Wait()
}

// dial connects to the upstreams in turn, starting after the one used last.
func (p *Proxy) dial(ctx context.Context) (net.Conn, string, error) {
	timeout := p.DialTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	p.mu.Lock()
	start := p.next
	p.next = (p.next + 1) % len(p.Upstreams)
	p.mu.Unlock()
	var errs []error
	for i := range p.Upstreams {
		addr := p.Upstreams[(start+i)%len(p.Upstreams)]
		d := net.Dialer{Timeout: timeout}
		up, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return up, addr, nil
		}
		errs = append(errs, err)
	}
	return nil, "", fmt.Errorf("no upstream accepted: %w", errors.Join(errs...))
}

// track records c so that stopping closes it; false when Serve is stopping (closeAll ran).
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return false
	}
	if p.conns == nil {
		p.conns = map[net.Conn]struct{}{}
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// closeAll closes every connection and marks the proxy stopping: no connection is tracked
// (and so none forwarded) after it.
func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopping = true
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *Proxy) logf(format string, args ...any) {
	if p.Logf != nil {
		p.Logf(format, args...)
	}
}
