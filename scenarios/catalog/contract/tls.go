package contract

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// tlsPolicy is W11: what the webhook server's TLS accepts and refuses, through the Service and
// directly at every serving pod. The API server's handshake (TLS 1.2–1.3, Go's default suites,
// ALPN h2 and http/1.1) must succeed; TLS 1.0 and 1.1 (deprecated by RFC 8996, never offered
// by the API server) and the suites Go names insecure (RC4, 3DES, CBC with SHA-256) must be
// refused. What else is accepted — each version, each TLS 1.2 suite, the ALPN protocol chosen
// — is noted in the report, so two releases of a target can be compared.
func tlsPolicy() e2etypes.Feature {
	return features.New("the webhook server accepts the API server's TLS and refuses TLS below 1.2 and insecure suites").
		WithLabel(suite.LabelScenario, "W11").
		Assess("through the Service and at every serving pod: the API server's handshake succeeds, TLS 1.0, 1.1 and insecure suites are refused", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			routes := tlsRoutes(ctx, t, c, it)
			var broken []string
			for _, r := range routes {
				seen := offerEach(ctx, r, it.Served.ServiceHost())
				suite.Note(ctx, t, "accepted "+r.name, seen.accepted())
				broken = append(broken, seen.violations(r.name)...)
			}
			if len(broken) > 0 {
				expect.Errorf(t, "expected the API server's handshake accepted and TLS 1.0, 1.1 and Go's insecure suites refused; saw:\n  %s", strings.Join(broken, "\n  "))
			}
			return ctx
		}).Feature()
}

// tlsRoute is one way to the webhook server: the Service, or one pod directly.
type tlsRoute struct {
	name string
	dial func(ctx context.Context) (net.Conn, error)
}

// tlsRoutes are the Service and every Ready pod of the Deployment behind it, on the serving port.
func tlsRoutes(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed) []tlsRoute {
	t.Helper()
	s := it.Served
	routes := []tlsRoute{{
		name: fmt.Sprintf("through Service %s/%s:%d", s.Namespace, s.Service, s.ServicePort),
		dial: func(ctx context.Context) (net.Conn, error) {
			return c.DialService(ctx, s.Namespace, s.Service, s.ServicePort)
		},
	}}
	pods, err := release.DeploymentPods(ctx, c.Kube(), s.Namespace, s.Deployment)
	expect.NoError(t, err, "listing the pods behind Service %s/%s", s.Namespace, s.Service)
	for _, p := range pods {
		if p.DeletionTimestamp != nil || !release.PodReady(&p) {
			continue
		}
		routes = append(routes, tlsRoute{
			name: fmt.Sprintf("directly (pod %s:%d)", p.Name, s.ContainerPort),
			dial: func(ctx context.Context) (net.Conn, error) { return c.DialPod(ctx, &p, s.ContainerPort) },
		})
	}
	if len(routes) == 1 {
		expect.Fatalf(t, "expected a Ready pod of Deployment %s/%s to reach directly; saw none of %d", s.Namespace, s.Deployment, len(pods))
	}
	return routes
}

// offer is one ClientHello: a name for the report, and how it departs from the API server's.
type offer struct {
	name     string
	version  uint16 // the only version offered; 0: TLS 1.2–1.3, as the API server offers
	suites   []uint16
	required bool // it must be accepted: the API server's own handshake
	insecure bool // it must be refused
}

// offers are the API server's handshake, each TLS version alone, and each TLS 1.2 suite alone.
func offers() []offer {
	all := slices.Concat(tls.CipherSuites(), tls.InsecureCipherSuites())
	offers := []offer{{name: "the API server's handshake (TLS 1.2–1.3, ALPN h2, http/1.1)", required: true}}
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11, tls.VersionTLS12, tls.VersionTLS13} {
		o := offer{name: tls.VersionName(v), version: v, insecure: v < tls.VersionTLS12}
		if v < tls.VersionTLS13 {
			o.suites = suitesFor(all, v)
		}
		offers = append(offers, o)
	}
	for _, s := range all {
		if slices.Contains(s.SupportedVersions, tls.VersionTLS12) {
			offers = append(offers, offer{name: "TLS 1.2 " + s.Name, version: tls.VersionTLS12, suites: []uint16{s.ID}, insecure: s.Insecure})
		}
	}
	return offers
}

// suitesFor are the IDs of the suites that can be used with version v.
func suitesFor(suites []*tls.CipherSuite, v uint16) []uint16 {
	var ids []uint16
	for _, s := range suites {
		if slices.Contains(s.SupportedVersions, v) {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// handshakeBound bounds one handshake; a server that refuses answers with an alert at once.
const handshakeBound = 10 * time.Second

// outcome is what one offer got: a negotiated version, suite and protocol, or why the
// handshake failed — or why no connection was made, which judges nothing.
type outcome struct {
	offer
	state   tls.ConnectionState
	err     error
	dialErr error
}

// offered is every offer's outcome on one route.
type offered []outcome

// offerEach makes every offer on route r, one connection each. It verifies no certificate (W2
// does): only what the server agrees to is judged.
func offerEach(ctx context.Context, r tlsRoute, host string) offered {
	var seen offered
	for _, o := range offers() {
		cfg := &tls.Config{ServerName: host, InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12} //nolint:gosec // G402: only what the server agrees to is judged; W2 judges its certificate
		if o.version != 0 {
			cfg.MinVersion, cfg.MaxVersion = o.version, o.version
		}
		cfg.CipherSuites = o.suites
		seen = append(seen, handshake(ctx, r, cfg, o))
	}
	return seen
}

func handshake(ctx context.Context, r tlsRoute, cfg *tls.Config, o offer) outcome {
	ctx, cancel := context.WithTimeout(ctx, handshakeBound)
	defer cancel()
	raw, err := r.dial(ctx)
	if err != nil {
		return outcome{offer: o, dialErr: err}
	}
	conn := tls.Client(raw, cfg)
	defer func() { _ = conn.Close() }()
	err = conn.HandshakeContext(ctx)
	return outcome{offer: o, state: conn.ConnectionState(), err: err}
}

// accepted lists what the server agreed to, for the report.
func (s offered) accepted() []string {
	var out []string
	for _, o := range s {
		if o.err == nil {
			out = append(out, fmt.Sprintf("%s: %s %s, ALPN %q", o.name, tls.VersionName(o.state.Version), tls.CipherSuiteName(o.state.CipherSuite), o.state.NegotiatedProtocol))
		}
	}
	return out
}

// violations say, on route, what the server accepted that it must refuse and refused that it
// must accept.
func (s offered) violations(route string) []string {
	var out []string
	for _, o := range s {
		switch {
		case o.dialErr != nil:
			out = append(out, fmt.Sprintf("%s: %s: no connection to judge it on: %v", route, o.name, o.dialErr))
		case o.required && o.err != nil:
			out = append(out, fmt.Sprintf("%s: %s failed: %v", route, o.name, o.err))
		case o.insecure && o.err == nil:
			out = append(out, fmt.Sprintf("%s: %s accepted (negotiated %s %s), which must be refused", route, o.name, tls.VersionName(o.state.Version), tls.CipherSuiteName(o.state.CipherSuite)))
		}
	}
	return out
}
