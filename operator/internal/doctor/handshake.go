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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream"
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
// caBundle. With ConnectAuto it dials the ClusterIP, then the endpoints, then — when nothing
// is reachable from here (a cluster whose Service and Pod networks are not routable from this
// machine) — a port-forward to an endpoint Pod; with ConnectPortForward only the port-forward.
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
		limit := s.handshakeLimit(b)
		state, target, attempts, err := s.handshake(ctx, cfg, limit.wait)
		details = append(details, attempts...)
		if target == "" {
			return failure(title, s.unreachableCause(host, err), details...)
		}
		if err != nil {
			return failure(title, s.verificationCause(target, host, err, b, limit), details...)
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

// handshakeLimit is how long a handshake with the server behind a caBundle may take.
type handshakeLimit struct {
	wait time.Duration
	// timeoutSeconds is set when wait is the API server's: the longest timeoutSeconds of the
	// webhooks that trust the caBundle, which bounds their calls, handshake included.
	timeoutSeconds bool
}

// handshakeLimit gives the handshake what the API server gives a call of the webhooks that
// trust b, the handshake included: the longest of their timeoutSeconds. A handshake that takes
// longer makes every one of those calls fail (T9), which the doctor says rather than waiting
// on. Without a timeoutSeconds to go by (a conversion webhook's), DialTimeout bounds it.
func (s *session) handshakeLimit(b trustBundle) handshakeLimit {
	var longest int32
	for _, w := range s.webhooks() {
		if slices.Contains(b.webhooks, w.name) {
			longest = max(longest, w.timeoutSeconds)
		}
	}
	if longest <= 0 {
		return handshakeLimit{wait: s.opts.DialTimeout}
	}
	return handshakeLimit{wait: time.Duration(longest) * time.Second, timeoutSeconds: true}
}

// Why the handshake goes through a port-forward, as the details say it.
const (
	whyForwardFlag     = "--connect=port-forward: the ClusterIP and Pod IPs are not dialed from this machine"
	whyForwardFallback = "no address of the Service accepted a connection from here and not all refused it (this machine is outside the cluster network?)"
)

// handshake reaches the webhook server and does the TLS handshake: target is where the first
// connection that was accepted went, err the handshake's result. When none was accepted,
// target is empty and err the last connection error. attempts are details: the failed
// connections and, when it port-forwarded, why.
//
// ConnectPortForward goes straight to the port-forward. ConnectAuto tries the targets in
// order; a refused connection means nothing listens there, anything else (timeouts, no route)
// usually means this machine is outside the cluster network, which a port-forward through the
// API server bridges.
func (s *session) handshake(ctx context.Context, cfg *tls.Config, limit time.Duration) (tls.ConnectionState, string, []string, error) {
	if s.opts.Connect == ConnectPortForward {
		return s.handshakeForwarded(ctx, cfg, limit, whyForwardFlag, nil, nil)
	}
	var attempts []string
	var lastErr error
	allRefused := true
	for _, t := range s.dialTargets() {
		state, dialErr, err := s.handshakeAt(ctx, t.addr, cfg, limit)
		if dialErr != nil {
			attempts = append(attempts, fmt.Sprintf("%s (%s): %v", t.addr, t.via, dialErr))
			lastErr = dialErr
			allRefused = allRefused && isRefused(dialErr)
			continue
		}
		return state, t.addr + " (" + t.via + ")", attempts, err
	}
	if lastErr != nil && !allRefused && (s.clientset != nil || s.forward != nil) {
		return s.handshakeForwarded(ctx, cfg, limit, whyForwardFallback, attempts, lastErr)
	}
	return tls.ConnectionState{}, "", attempts, lastErr
}

// handshakeForwarded does the handshake through a port-forward to each ready endpoint Pod in
// turn until one accepts the connection; why leads its details. attempts and lastErr are what
// was tried before.
func (s *session) handshakeForwarded(ctx context.Context, cfg *tls.Config, limit time.Duration, why string, attempts []string, lastErr error) (tls.ConnectionState, string, []string, error) {
	attempts = append(attempts, "reaching the webhook through a port-forward to a ready endpoint pod, via the API server: "+why)
	tried := false
	for _, e := range s.endpoints {
		if e.pod == "" {
			continue
		}
		tried = true
		where := fmt.Sprintf("pod %s port %d (port-forward)", e.pod, e.port)
		addr, stop, err := s.portForwardTo(ctx, e.pod, e.port)
		if err != nil {
			attempts = append(attempts, fmt.Sprintf("%s: %v", where, err))
			lastErr = err
			continue
		}
		state, dialErr, err := s.handshakeAt(ctx, addr, cfg, limit)
		if farErr := stop(); farErr != nil && (dialErr != nil || err != nil) {
			// The far end could not connect to the Pod's port: the local connection was
			// accepted, but the handshake never reached a server.
			dialErr = farErr
		}
		if dialErr != nil {
			attempts = append(attempts, fmt.Sprintf("%s: %v", where, dialErr))
			lastErr = dialErr
			continue
		}
		return state, where, attempts, err
	}
	if !tried {
		err := fmt.Errorf("no ready endpoint of Service %s/%s names a pod to port-forward to", s.opts.Namespace, s.serviceName)
		attempts = append(attempts, err.Error())
		if lastErr == nil {
			lastErr = errNoPodToForward{err}
		}
	}
	return tls.ConnectionState{}, "", attempts, lastErr
}

// errNoPodToForward: the endpoints name no Pod (a port-forward goes to a Pod).
type errNoPodToForward struct{ error }

func (e errNoPodToForward) Unwrap() error { return e.error }

// handshakeAt connects to addr within DialTimeout (dialErr when that fails) and does the TLS
// handshake within limit (err).
func (s *session) handshakeAt(ctx context.Context, addr string, cfg *tls.Config, limit time.Duration) (state tls.ConnectionState, dialErr, err error) {
	dial := s.dial
	if dial == nil {
		d := net.Dialer{}
		dial = d.DialContext
	}
	dialCtx, cancelDial := context.WithTimeout(ctx, s.opts.DialTimeout)
	conn, dialErr := dial(dialCtx, "tcp", addr)
	cancelDial()
	if dialErr != nil {
		return state, dialErr, nil
	}
	defer func() { _ = conn.Close() }() // only the handshake's outcome is reported
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return state, nil, err
	}
	return tc.ConnectionState(), nil, nil
}

// portForwardTo forwards a local port to the Pod's port (see portForward); stop ends it and
// returns what the far end reported when it could not connect to the Pod's port.
func (s *session) portForwardTo(ctx context.Context, pod string, port int32) (addr string, stop func() error, err error) {
	if s.forward != nil {
		return s.forward(ctx, pod, port)
	}
	if s.clientset == nil || s.cfg == nil {
		return "", nil, errors.New("no API server connection to port-forward through")
	}
	return s.portForward(ctx, pod, port)
}

// portForward forwards a local port to the Pod's port through the API server, as `kubectl
// port-forward` does (WebSocket first, SPDY as fallback). The forwarder reports the far end's
// errors (the kubelet's "… connect: connection refused") only to its logger: stop returns the
// first one, as a refused connection when it is one.
func (s *session) portForward(ctx context.Context, pod string, port int32) (addr string, stop func() error, err error) {
	req := s.clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.opts.Namespace).Name(pod).SubResource("portforward")
	transport, upgrader, err := spdy.RoundTripperFor(s.cfg)
	if err != nil {
		return "", nil, fmt.Errorf("preparing a port-forward to pod %s/%s: %w", s.opts.Namespace, pod, err)
	}
	// The k8s.io/streaming variants throughout: the WebSocket dialer reports a failed upgrade as
	// k8s.io/streaming's UpgradeFailureError, which the deprecated
	// k8s.io/apimachinery/pkg/util/httpstream.IsUpgradeFailure does not recognise, so the SPDY
	// fallback would never be taken.
	dialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, req.URL())
	if tunneling, err := portforward.NewSPDYOverWebsocketDialerForStreaming(req.URL(), s.cfg); err == nil {
		dialer = portforward.NewFallbackDialerForStreaming(tunneling, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}
	far := &forwardErrors{}
	fwCtx, cancel := context.WithCancel(klog.NewContext(ctx, logr.New(far)))
	ready := make(chan struct{})
	fw, err := portforward.NewOnAddressesForStreamingWithContext(fwCtx, dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, ready, io.Discard, io.Discard)
	if err != nil {
		cancel()
		return "", nil, fmt.Errorf("port-forwarding to pod %s/%s: %w", s.opts.Namespace, pod, err)
	}
	// done closes when ForwardPorts returns; fwErr is then its result. Once we cancel, that
	// result (nil, or a lost connection) adds nothing: the far end's errors are what matter.
	done := make(chan struct{})
	var fwErr error
	go func() { fwErr = fw.ForwardPorts(); close(done) }()
	select {
	case <-ready:
	case <-done:
		cancel()
		return "", nil, fmt.Errorf("port-forwarding to pod %s/%s: %w", s.opts.Namespace, pod, fwErr)
	case <-ctx.Done():
		cancel()
		return "", nil, fmt.Errorf("port-forwarding to pod %s/%s: %w", s.opts.Namespace, pod, ctx.Err())
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		cancel()
		<-done
		return "", nil, fmt.Errorf("port-forwarding to pod %s/%s: no local port: %v", s.opts.Namespace, pod, err)
	}
	stop = func() error {
		cancel()
		<-done
		return far.first()
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))), stop, nil
}

// forwardErrors is the logger of a port-forward: it keeps the errors the forwarder reports.
type forwardErrors struct {
	mu   sync.Mutex
	errs []string
}

func (f *forwardErrors) Init(logr.RuntimeInfo)          {}
func (f *forwardErrors) Enabled(int) bool               { return false }
func (f *forwardErrors) Info(int, string, ...any)       {}
func (f *forwardErrors) WithValues(...any) logr.LogSink { return f }
func (f *forwardErrors) WithName(string) logr.LogSink   { return f }

func (f *forwardErrors) Error(err error, msg string, _ ...any) {
	if err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, msg+": "+err.Error())
}

// first is the first error the far end reported: a refusedError when it says the connection
// to the Pod's port was refused.
func (f *forwardErrors) first() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.errs {
		if strings.Contains(e, "connection refused") {
			return refusedError(e)
		}
	}
	if len(f.errs) > 0 {
		return errors.New(f.errs[0])
	}
	return nil
}

// refusedError is a connection refused at the far end of a port-forward: it is
// syscall.ECONNREFUSED, as a refused dial here is.
type refusedError string

func (e refusedError) Error() string        { return string(e) }
func (e refusedError) Is(target error) bool { return target == syscall.ECONNREFUSED }

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// unreachableCause explains why no address of the webhook accepted a connection.
func (s *session) unreachableCause(host string, err error) cause {
	if s.opts.Connect == ConnectPortForward {
		return s.unreachableForwardedCause(host, err)
	}
	switch {
	case err == nil:
		return undocumented(fmt.Sprintf("Service %s/%s has no address to dial", s.opts.Namespace, s.serviceName), s.fix.reinstall())
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

// unreachableForwardedCause is unreachableCause with --connect=port-forward: the same
// classification, said of the port-forward.
func (s *session) unreachableForwardedCause(host string, err error) cause {
	canForward := fmt.Sprintf("kubectl auth can-i create pods/portforward -n %s", s.opts.Namespace)
	var noPod errNoPodToForward
	switch {
	case err == nil, errors.As(err, &noPod):
		return undocumented(fmt.Sprintf("connecting to the webhook behind %s through a port-forward (--connect=port-forward): no ready endpoint of Service %s/%s names a pod to port-forward to",
			host, s.opts.Namespace, s.serviceName),
			"run the doctor with --connect=auto from a machine that reaches the cluster's Service network", s.fix.describePods())
	case isRefused(err):
		return documented(t6, fmt.Sprintf("connecting to the webhook behind %s through a port-forward (--connect=port-forward): connection refused (nothing listens on the pod's webhook port)", host),
			s.fix.describePods(), s.fix.logs())
	case isTimeout(err):
		return undocumented(fmt.Sprintf("connecting to the webhook behind %s through a port-forward (--connect=port-forward): timeout: no port-forward to an endpoint pod answered", host),
			canForward, s.fix.describePods())
	}
	return undocumented(fmt.Sprintf("connecting to the webhook behind %s through a port-forward (--connect=port-forward): %v", host, err),
		canForward, s.fix.describePods())
}

// verificationCause names what the API server would fail with, given the handshake error.
func (s *session) verificationCause(target, host string, err error, bundle trustBundle, limit handshakeLimit) cause {
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var unknown x509.UnknownAuthorityError
	var verifyErr *tls.CertificateVerificationError
	webhooks := bundle.webhooks
	if (errors.As(err, &unknown) || errors.As(err, &invalid)) && errors.As(err, &verifyErr) && len(verifyErr.UnverifiedCertificates) > 0 {
		// The caBundle may hold the very CA that signed the certificate, outside its validity.
		// Go (and so the API server) reports that as "certificate has expired or is not yet
		// valid" — of the CA, not the served certificate — or, with several candidate CAs, as
		// an unknown authority.
		now := s.opts.Now()
		if ca := expiredIssuer(issuerPath(verifyErr.UnverifiedCertificates, bundle.roots), now); ca != nil {
			return s.expiredCACause(fmt.Sprintf("the caBundle of %s (the certificate %s serves)", s.webhookList(webhooks), target), ca, now)
		}
	}
	switch {
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return documented(t5, fmt.Sprintf("%s serves a certificate that is expired or not yet valid: %v", target, invalid), s.reissue()...)
	case errors.As(err, &hostErr):
		return documented(t4, fmt.Sprintf("%s serves a certificate for the wrong names: %v", target, hostErr), s.reissue()...)
	case errors.As(err, &unknown):
		return documented(t3, fmt.Sprintf("%s serves a certificate the caBundle of %s does not trust: %v", target, s.webhookList(webhooks), unknown),
			s.injectFix()...)
	case isTimeout(err) && limit.timeoutSeconds:
		return documented(t9, fmt.Sprintf("TLS handshake with %s: no answer within %s, the longest timeoutSeconds of %s: every call the API server makes to them times out (context deadline exceeded) before the webhook answers",
			target, limit.wait, s.webhookList(webhooks)),
			s.fix.logs()+"   # why the webhook answers slowly", s.fix.rolloutRestart(),
			"# or raise the webhooks' timeoutSeconds (at most 30) where the operator's installation sets them")
	case isTimeout(err):
		return undocumented(fmt.Sprintf("TLS handshake with %s: timeout: it accepts connections but does not complete a handshake within %s", target, limit.wait),
			s.fix.logs(), s.fix.rolloutRestart())
	}
	return undocumented(fmt.Sprintf("TLS handshake with %s for %s failed: %v", target, host, err), s.fix.logs())
}
