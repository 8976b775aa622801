// Command gauntlet-delay-proxy forwards every TCP connection it accepts to the upstreams of the
// port it came in on, each byte the client sends --delay late and the answers at once (package
// delayproxy). W16 runs
// it in the cluster in front of a target's webhook server to make the webhook slower than its
// timeoutSeconds (T9) without touching the operator.
//
//	gauntlet-delay-proxy --delay 5s --route 8443=10.244.0.7:8443,10.244.0.8:8443
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/delayproxy"
)

func main() {
	fs := flag.NewFlagSet("gauntlet-delay-proxy", flag.ExitOnError)
	delay := fs.Duration("delay", 0, "how late each byte a client sends reaches the upstream (required)")
	var routes []route
	fs.Func("route", "PORT=HOST:PORT[,HOST:PORT…]: listen on PORT, forward to these upstreams (repeatable, at least one)", func(v string) error {
		r, err := parseRoute(v)
		routes = append(routes, r)
		return err
	})
	_ = fs.Parse(os.Args[1:])
	if *delay <= 0 || len(routes) == 0 {
		fmt.Fprintln(os.Stderr, "gauntlet-delay-proxy: --delay and at least one --route are required")
		fs.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, *delay, routes); err != nil {
		log.Fatal(err)
	}
}

// route is one port the proxy listens on and where it forwards what comes in.
type route struct {
	port      int
	upstreams []string
}

func parseRoute(v string) (route, error) {
	port, list, ok := strings.Cut(v, "=")
	n, err := strconv.Atoi(port)
	if !ok || err != nil || n <= 0 || n > 65535 || list == "" {
		return route{}, fmt.Errorf("--route %q: want PORT=HOST:PORT[,HOST:PORT…]", v)
	}
	r := route{port: n}
	for _, u := range strings.Split(list, ",") {
		if _, _, err := net.SplitHostPort(u); err != nil {
			return route{}, fmt.Errorf("--route %q: upstream %q: %w", v, u, err)
		}
		r.upstreams = append(r.upstreams, u)
	}
	return r, nil
}

// serve runs one proxy per route until ctx is done (SIGTERM), which closes every connection.
func serve(ctx context.Context, delay time.Duration, routes []route) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(routes))
	var wg sync.WaitGroup
	for i, r := range routes {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", r.port))
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		log.Printf("listening on %s: forwarding to %s, each byte a client sends %s late", l.Addr(), strings.Join(r.upstreams, ", "), delay)
		p := &delayproxy.Proxy{Delay: delay, Upstreams: r.upstreams, Logf: log.Printf}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = p.Serve(ctx, l); errs[i] != nil {
				cancel() // one port failing stops the others: the pod restarts whole
			}
		}()
	}
	wg.Wait()
	log.Printf("stopped: every connection closed")
	return errors.Join(errs...)
}
