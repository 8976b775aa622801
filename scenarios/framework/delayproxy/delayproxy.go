// Package delayproxy is a TCP proxy that forwards every connection it accepts to one of its
// upstreams, delivering each byte the client sends a fixed delay after it arrived, and the
// upstream's answers at once: a link from client to server with that much latency. Put in front
// of a webhook server (the webhook Service's selector pointed at its pods), it makes every call
// the API server makes — a new connection's TLS handshake, and each request on a connection kept
// alive — slower than its timeoutSeconds, without touching the operator: TLS passes through
// untouched, so the served certificate and its SAN are the server's own.
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

// Proxy forwards connections to the first of Upstreams that accepts, trying them in turn from
// one connection to the next; every byte a client sends reaches the upstream Delay after the
// proxy read it.
type Proxy struct {
	// Delay is how late each byte from the client is delivered.
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
// forwards and returns once their goroutines have ended.
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

// handle forwards c to an upstream until either side closes: what c sends, Delay late; what the
// upstream answers, at once. A client that sends a request on a connection it keeps alive meets
// the delay again, as it would meet a webhook that is slow to answer every request: the delay
// is not paid once per connection.
func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	defer p.untrack(c)
	from := c.RemoteAddr().String()
	up, addr, err := p.dial(ctx)
	if err != nil {
		p.logf("%s: %v", from, err)
		return
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	p.logf("%s: forwarding to %s, each byte it sends %s late", from, addr, p.Delay)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		p.late(ctx, up, c)
		closeWrite(up)
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(c, up)
		closeWrite(c)
	}()
	wg.Wait()
}

// closeWrite tells c's peer that nothing more comes, while it may still answer (half close).
func closeWrite(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = c.Close()
}

// late copies src to dst until src ends, writing each chunk it reads Delay after reading it.
func (p *Proxy) late(ctx context.Context, dst, src net.Conn) {
	type chunk struct {
		b    []byte
		read time.Time
	}
	chunks, done := make(chan chunk, 64), make(chan struct{})
	defer close(done) // a reader blocked on a full queue gives up
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case chunks <- chunk{buf[:n], time.Now()}:
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range chunks {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(ch.read.Add(p.Delay))):
		}
		if _, err := dst.Write(ch.b); err != nil {
			return
		}
	}
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
