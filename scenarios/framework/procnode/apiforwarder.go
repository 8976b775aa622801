package procnode

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// apiForwarder gives pods a way to the apiserver: inside a pod network namespace 127.0.0.1
// is the pod itself, so the node listens on its bridge address and passes TCP through to
// the apiserver. TLS stays end to end (the apiserver's cert carries the bridge address).
type apiForwarder struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// startAPIForwarder listens on listenAddr. When the address is taken — the apiserver
// itself listens on all interfaces — it returns nil: pods reach the apiserver directly.
func startAPIForwarder(listenAddr, target string) (*apiForwarder, error) {
	ln, err := net.Listen("tcp", listenAddr)
	if errors.Is(err, syscall.EADDRINUSE) {
		klog.InfoS("apiserver address for pods already served; not forwarding", "address", listenAddr)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listening on %s for pods' apiserver traffic: %w", listenAddr, err)
	}
	f := &apiForwarder{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go f.serve()
	return f, nil
}

func (f *apiForwarder) serve() {
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			f.track(conn, true)
			defer f.track(conn, false)
			defer func() { _ = conn.Close() }() // the pod's side; the forward is over either way
			backend, err := net.DialTimeout("tcp", f.target, 5*time.Second)
			if err != nil {
				klog.ErrorS(err, "forwarding pod connection to the apiserver", "target", f.target)
				return
			}
			pipe(conn, backend)
		}()
	}
}

func (f *apiForwarder) track(c net.Conn, add bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if add {
		f.conns[c] = struct{}{}
	} else {
		delete(f.conns, c)
	}
}

func (f *apiForwarder) close() {
	if f == nil {
		return
	}
	_ = f.ln.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		_ = c.Close()
	}
}
