package doctor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// dialTarget is an address the webhook server may be reached at from here.
type dialTarget struct {
	addr string
	via  string // what the address is, for details
	pod  string // set for endpoints: the port-forward fallback goes to this Pod
	port int32
}

// dialTargets are the Service's ClusterIP:port, as the API server dials it, then every ready
// endpoint.
func (s *session) dialTargets() []dialTarget {
	var out []dialTarget
	if ip := s.service.Spec.ClusterIP; ip != "" && ip != "None" {
		out = append(out, dialTarget{
			addr: net.JoinHostPort(ip, strconv.Itoa(int(s.servicePort.Port))),
			via:  fmt.Sprintf("ClusterIP of Service %s/%s", s.opts.Namespace, s.serviceName),
		})
	}
	for _, e := range s.endpoints {
		out = append(out, dialTarget{addr: e.hostPort(), via: "endpoint (pod " + e.pod + ")", pod: e.pod, port: e.port})
	}
	return out
}

// checkServingCertificate does the API server's part of a webhook call: a TLS handshake
// with ServerName <svc>.<ns>.svc, verifying the served certificate against each distinct
// caBundle. It dials the ClusterIP, then the endpoints, then — when nothing is reachable from
// here (a cluster whose Service and Pod networks are not routable from this machine) — a
// port-forward to an endpoint Pod.
func checkServingCertificate(ctx context.Context, s *session) outcome {
	host := s.serviceHost()
	title := fmt.Sprintf("the webhook serves a certificate for %s that the caBundle trusts", host)
	if len(s.bundles) == 0 {
		return skip(title, "no parseable caBundle to verify the served certificate against")
	}
	var details []string
	for _, b := range s.bundles {
		pool := x509.NewCertPool()
		for _, r := range b.roots {
			pool.AddCert(r)
		}
		cfg := &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12, Time: s.opts.Now}
		state, target, attempts, err := s.handshake(ctx, cfg)
		details = append(details, attempts...)
		if target == "" {
			return failure(title, s.unreachableCause(host, err), details...)
		}
		if err != nil {
			return failure(title, s.verificationCause(target, host, err, b.webhooks), details...)
		}
		leaf := state.PeerCertificates[0]
		details = append(details, fmt.Sprintf("%s: handshake verified against the caBundle of %s", target, s.webhookList(b.webhooks)),
			describeCertificate("served certificate", leaf))
		if s.secretChain != nil {
			if leaf.Equal(s.secretChain[0]) {
				details = append(details, "the served certificate is the Secret's tls.crt")
			} else {
				details = append(details, fmt.Sprintf("the served certificate differs from tls.crt of Secret %s/%s (not reloaded yet?)", s.opts.Namespace, s.secretName))
			}
		}
	}
	return pass(title, details...)
}

// handshake tries the targets in order. The first one that accepts a TCP connection decides:
// target is that address, err the handshake's result. When none accepts, target is empty and
// err the last dial error.
func (s *session) handshake(ctx context.Context, cfg *tls.Config) (tls.ConnectionState, string, []string, error) {
	var attempts []string
	var lastErr error
	allRefused := true
	for _, t := range s.dialTargets() {
		state, dialErr, err := s.handshakeAt(ctx, t.addr, cfg)
		if dialErr != nil {
			attempts = append(attempts, fmt.Sprintf("%s (%s): %v", t.addr, t.via, dialErr))
			lastErr = dialErr
			allRefused = allRefused && isRefused(dialErr)
			continue
		}
		return state, t.addr + " (" + t.via + ")", attempts, err
	}
	// Nothing reachable directly. A refused connection means nothing listens there; anything
	// else (timeouts, no route) usually means this machine is outside the cluster network,
	// which a port-forward through the API server bridges.
	if lastErr != nil && !allRefused && s.clientset != nil {
		for _, e := range s.endpoints {
			if e.pod == "" {
				continue
			}
			addr, stop, err := s.portForward(ctx, e.pod, e.port)
			if err != nil {
				attempts = append(attempts, fmt.Sprintf("port-forward to pod %s port %d: %v", e.pod, e.port, err))
				lastErr = err
				continue
			}
			state, dialErr, err := s.handshakeAt(ctx, addr, cfg)
			stop()
			if dialErr != nil {
				attempts = append(attempts, fmt.Sprintf("port-forward to pod %s port %d: %v", e.pod, e.port, dialErr))
				lastErr = dialErr
				continue
			}
			return state, fmt.Sprintf("pod %s port %d (port-forward)", e.pod, e.port), attempts, err
		}
	}
	return tls.ConnectionState{}, "", attempts, lastErr
}

// handshakeAt connects to addr (dialErr when that fails) and does the TLS handshake (err).
func (s *session) handshakeAt(ctx context.Context, addr string, cfg *tls.Config) (state tls.ConnectionState, dialErr, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.DialTimeout)
	defer cancel()
	d := net.Dialer{}
	conn, dialErr := d.DialContext(ctx, "tcp", addr)
	if dialErr != nil {
		return state, dialErr, nil
	}
	defer conn.Close()
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return state, nil, err
	}
	return tc.ConnectionState(), nil, nil
}

// portForward forwards a local port to the Pod's port through the API server, as `kubectl
// port-forward` does (WebSocket first, SPDY as fallback).
func (s *session) portForward(ctx context.Context, pod string, port int32) (addr string, stop func(), err error) {
	req := s.clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.opts.Namespace).Name(pod).SubResource("portforward")
	transport, upgrader, err := spdy.RoundTripperFor(s.cfg)
	if err != nil {
		return "", nil, fmt.Errorf("preparing a port-forward to pod %s/%s: %w", s.opts.Namespace, pod, err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, req.URL())
	if tunneling, err := portforward.NewSPDYOverWebsocketDialer(req.URL(), s.cfg); err == nil {
		dialer = portforward.NewFallbackDialer(tunneling, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}
	fwCtx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	fw, err := portforward.NewOnAddressesWithContext(fwCtx, dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, ready, io.Discard, io.Discard)
	if err != nil {
		cancel()
		return "", nil, fmt.Errorf("port-forwarding to pod %s/%s: %w", s.opts.Namespace, pod, err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		return "", nil, fmt.Errorf("port-forwarding to pod %s/%s: %w", s.opts.Namespace, pod, err)
	case <-ctx.Done():
		cancel()
		return "", nil, fmt.Errorf("port-forwarding to pod %s/%s: %w", s.opts.Namespace, pod, ctx.Err())
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		cancel()
		return "", nil, fmt.Errorf("port-forwarding to pod %s/%s: no local port: %v", s.opts.Namespace, pod, err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))), func() { cancel(); <-done }, nil
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// unreachableCause explains why no address of the webhook accepted a connection.
func (s *session) unreachableCause(host string, err error) cause {
	switch {
	case err == nil:
		return undocumented(fmt.Sprintf("Service %s/%s has no address to dial", s.opts.Namespace, s.serviceName), s.fix.helmUpgrade())
	case isRefused(err):
		return documented(t6, fmt.Sprintf("connecting to the webhook behind %s: connection refused (nothing listens on the Service's port)", host),
			s.fix.describePods(), s.fix.logs())
	case isTimeout(err):
		return undocumented(fmt.Sprintf("connecting to the webhook behind %s: timeout: neither the ClusterIP, the endpoints nor a port-forward answered", host),
			"run the doctor from a machine that reaches the cluster's Service network, or with credentials allowed to create pods/portforward",
			s.fix.describePods())
	}
	return undocumented(fmt.Sprintf("connecting to the webhook behind %s: %v", host, err), s.fix.describePods())
}

// verificationCause names what the API server would fail with, given the handshake error.
func (s *session) verificationCause(target, host string, err error, webhooks []string) cause {
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return documented(t5, fmt.Sprintf("%s serves a certificate that is expired or not yet valid: %v", target, invalid), s.reissue()...)
	case errors.As(err, &hostErr):
		return documented(t4, fmt.Sprintf("%s serves a certificate for the wrong names: %v", target, hostErr), s.reissue()...)
	case errors.As(err, &unknown):
		return documented(t3, fmt.Sprintf("%s serves a certificate the caBundle of %s does not trust: %v", target, s.webhookList(webhooks), unknown),
			s.injectFix()...)
	case isTimeout(err):
		return undocumented(fmt.Sprintf("TLS handshake with %s: timeout: it accepts connections but does not complete a handshake", target),
			s.fix.logs(), s.fix.rolloutRestart())
	}
	return undocumented(fmt.Sprintf("TLS handshake with %s for %s failed: %v", target, host, err), s.fix.logs())
}
