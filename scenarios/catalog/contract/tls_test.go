package contract

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
)

// serveTLS runs a TLS server on loopback with policy applied, answering handshakes only.
func serveTLS(t *testing.T, policy func(*tls.Config)) tlsRoute {
	t.Helper()
	sc, err := pki.NewServingCertificate("webhook.ns.svc")
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(sc.CertPEM, sc.KeyPEM)
	require.NoError(t, err)
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"http/1.1"}}
	policy(cfg)
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = conn.(*tls.Conn).Handshake()
				_ = conn.Close()
			}()
		}
	}()
	return tlsRoute{name: "loopback", dial: func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", l.Addr().String())
	}}
}

func TestTLSPolicyJudgesWhatTheServerAgreesTo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy func(*tls.Config)
		broken []string // what the violations must mention, in order; none: it passes
	}{
		{"gauntlet's policy: TLS 1.2 ECDHE AEAD suites and TLS 1.3", func(c *tls.Config) {
			c.MinVersion = tls.VersionTLS12
			c.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}
		}, nil},
		{"TLS 1.3 only, as Gatekeeper's default", func(c *tls.Config) { c.MinVersion = tls.VersionTLS13 }, nil},
		{"Go's defaults", func(*tls.Config) {}, nil},
		{"TLS 1.0 allowed", func(c *tls.Config) { c.MinVersion = tls.VersionTLS10 }, []string{"TLS 1.0 accepted (negotiated TLS 1.0", "TLS 1.1 accepted (negotiated TLS 1.1"}},
		{"TLS 1.2 only", func(c *tls.Config) { c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12 }, nil},
		{"an insecure suite allowed", func(c *tls.Config) {
			c.MaxVersion = tls.VersionTLS12
			c.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
		}, []string{"TLS 1.2 TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256 accepted"}},
		{"TLS 1.1 at most: the API server cannot connect", func(c *tls.Config) { c.MinVersion, c.MaxVersion = tls.VersionTLS10, tls.VersionTLS11 },
			[]string{"the API server's handshake (TLS 1.2–1.3, ALPN h2, http/1.1) failed", "TLS 1.0 accepted", "TLS 1.1 accepted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := offerEach(t.Context(), serveTLS(t, tc.policy), "webhook.ns.svc").violations("loopback")
			require.Len(t, got, len(tc.broken), strings.Join(got, "\n"))
			for i, want := range tc.broken {
				assert.Contains(t, got[i], want)
			}
		})
	}
}

func TestTLSPolicyJudgesNothingWithoutAConnection(t *testing.T) {
	r := tlsRoute{name: "nowhere", dial: func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:1")
	}}
	got := offerEach(t.Context(), r, "webhook.ns.svc").violations("nowhere")
	require.NotEmpty(t, got)
	assert.Contains(t, got[0], "no connection to judge it on")
}

func TestTLSPolicyReportsWhatWasAccepted(t *testing.T) {
	got := offerEach(t.Context(), serveTLS(t, func(c *tls.Config) { c.MinVersion = tls.VersionTLS13 }), "webhook.ns.svc").accepted()
	assert.Equal(t, []string{
		`the API server's handshake (TLS 1.2–1.3, ALPN h2, http/1.1): TLS 1.3 TLS_AES_128_GCM_SHA256, ALPN "http/1.1"`,
		`TLS 1.3: TLS 1.3 TLS_AES_128_GCM_SHA256, ALPN "http/1.1"`,
	}, got)
}
