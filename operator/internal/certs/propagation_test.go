package certs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	certutil "k8s.io/client-go/util/cert"
)

// trustSnapshot is what every caBundle trusted at one moment: the CAs all of them hold.
type trustSnapshot struct {
	at  time.Time
	cas []*x509.Certificate
}

// servedSample is the leaf the server presented at one moment.
type servedSample struct {
	at   time.Time
	leaf *x509.Certificate
}

// observeRotations samples, every 20 ms until stop is called, what every caBundle trusts and
// which certificate addr serves.
func observeRotations(t *testing.T, f *fixture, addr string) (stop func() ([]trustSnapshot, []servedSample)) {
	t.Helper()
	var mu sync.Mutex
	var trust []trustSnapshot
	var served []servedSample
	done := make(chan struct{})
	var wg sync.WaitGroup
	sample := func(do func()) {
		wg.Go(func() {
			for {
				do()
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}
	sample(func() {
		if cas, err := trustedByEvery(f); err == nil {
			mu.Lock()
			trust = append(trust, trustSnapshot{time.Now(), cas})
			mu.Unlock()
		}
	})
	sample(func() {
		d := &net.Dialer{Timeout: time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // G402: the test verifies the leaf itself, against the bundles of an earlier moment
		if err != nil {
			return
		}
		at := time.Now()
		leaf := conn.ConnectionState().PeerCertificates[0]
		_ = conn.Close() // only the handshake matters
		mu.Lock()
		served = append(served, servedSample{at, leaf})
		mu.Unlock()
	})
	var once sync.Once
	stopSampling := func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stopSampling)
	return func() ([]trustSnapshot, []servedSample) {
		stopSampling()
		mu.Lock()
		defer mu.Unlock()
		return trust, served
	}
}

// trustedByEvery returns the CAs that every caBundle of f holds.
func trustedByEvery(f *fixture) ([]*x509.Certificate, error) {
	bundles, err := f.caBundles()
	if err != nil {
		return nil, err
	}
	var common []*x509.Certificate
	first := true
	for _, b := range bundles {
		cas, err := certutil.ParseCertsPEM(b)
		if err != nil {
			return nil, nil // an empty bundle trusts nothing
		}
		if first {
			common, first = cas, false
			continue
		}
		var kept []*x509.Certificate
		for _, c := range common {
			for _, o := range cas {
				if c.Equal(o) {
					kept = append(kept, c)
					break
				}
			}
		}
		common = kept
	}
	return common, nil
}

// trustedAt returns what every caBundle trusted at the last snapshot taken at or before at
// (nil if none was).
func trustedAt(trust []trustSnapshot, at time.Time) []*x509.Certificate {
	var cas []*x509.Certificate
	for _, s := range trust {
		if s.at.After(at) {
			break
		}
		cas = s.cas
	}
	return cas
}

// TestRotationOutwaitsTheAPIServersView is P3's race, in the operator's own terms: an API
// server reads the caBundles through an informer, so it judges a handshake by the bundles of
// a moment ago. The served certificate must always verify against the bundles as they were
// lag ago, for any lag shorter than CAPropagation — never a certificate of a CA injected only
// just now.
func TestRotationOutwaitsTheAPIServersView(t *testing.T) {
	const (
		propagation = time.Second
		lag         = 700 * time.Millisecond // an API server this far behind the bundles
		watchFor    = 10 * time.Second
	)
	f := newFixture(t, "propagation")
	f.propagation = propagation
	o := f.options()
	// A rotation 2.5 s after each generation (validity − look-ahead), as P3's release does
	// every 4 s.
	o.CAValidity, o.ServerValidity, o.LookAhead = 5*time.Second, 5*time.Second, 2500*time.Millisecond
	c := f.controller(o)
	f.bootstrap(c)
	start(t, c)
	addr := tlsServer(t, c)

	stop := observeRotations(t, f, addr)
	time.Sleep(watchFor)
	trust, served := stop()

	leaves := map[string]bool{}
	for _, s := range served {
		leaves[string(s.leaf.Raw)] = true
	}
	violations := verifyAgainstLaggingView(f, trust, served, lag)
	require.GreaterOrEqual(t, len(leaves), 3, "expected at least 2 rotations in %s (3 certificates served), saw %d certificates in %d handshakes", watchFor, len(leaves), len(served))
	require.Empty(t, violations, "with CAPropagation %s, a certificate was served that an API server %s behind the caBundles would reject (%d of %d handshakes)", propagation, lag, len(violations), len(served))
}

// verifyAgainstLaggingView returns each handshake of served whose certificate the bundles of
// lag before it did not verify.
func verifyAgainstLaggingView(f *fixture, trust []trustSnapshot, served []servedSample, lag time.Duration) []string {
	var violations []string
	for _, s := range served {
		if len(trust) == 0 || s.at.Before(trust[0].at.Add(lag)) {
			continue // no snapshot from lag before this handshake
		}
		pool := x509.NewCertPool()
		for _, ca := range trustedAt(trust, s.at.Add(-lag)) {
			pool.AddCert(ca)
		}
		if _, err := s.leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: f.host(), CurrentTime: s.at}); err != nil {
			violations = append(violations, fmt.Sprintf("at %s served serial %x, which the bundles of %s before did not verify: %v",
				s.at.Format("15:04:05.000"), s.leaf.SerialNumber, lag, err))
		}
	}
	return violations
}

// TestAFollowerWaitsForAHandWrittenCAToPropagate is C5 through a replica that does not lead:
// the Secret replaced by hand with another CA, which the follower finds untrusted; once the
// leader has injected it, the follower too waits CAPropagation before serving it.
func TestAFollowerWaitsForAHandWrittenCAToPropagate(t *testing.T) {
	const (
		propagation = time.Second
		lag         = 700 * time.Millisecond
	)
	f := newFixture(t, "propagation-follower")
	f.propagation = propagation
	leader, follower := f.replica("leader"), f.replica("follower")
	for _, r := range []*replica{leader, follower} {
		f.bootstrap(r.c)
		start(t, r.c)
	}
	stopLeading := leader.lead(t)
	eventually(t, 15*time.Second, "the follower to serve the leader's first certificate", f.filesOf(follower))
	addr := tlsServer(t, follower.c)
	stopLeading() // so the follower surely reads the new Secret before anyone trusts its CA

	stop := observeRotations(t, f, addr)
	time.Sleep(2 * lag) // a view of the bundles from lag before every handshake that matters
	replacement := f.generateFor(nil)
	f.replaceSecret(replacement.secretData())
	eventually(t, 10*time.Second, "the follower to find the hand-written CA untrusted", func() error {
		_, err := follower.logs.line("cert-controller:", "do not trust yet")
		return err
	})
	leader.lead(t)
	eventually(t, 15*time.Second, "the follower to serve the hand-written certificate", func() error {
		return servesCertificate(addr, f.host(), replacement.caPEM, replacement.leaf)
	})
	trust, served := stop()
	t.Logf("the hand-written CA in every caBundle from %s, served by the follower from %s (%d handshakes)",
		firstTrusted(trust, replacement.ca), firstServed(served, replacement.leaf), len(served))
	violations := verifyAgainstLaggingView(f, trust, served, lag)
	require.Empty(t, violations, "with CAPropagation %s, the follower served a certificate an API server %s behind the caBundles would reject (%d of %d handshakes)", propagation, lag, len(violations), len(served))
}

// firstTrusted is when ca was first in every caBundle ("never" if it was not).
func firstTrusted(trust []trustSnapshot, ca *x509.Certificate) string {
	for _, s := range trust {
		for _, c := range s.cas {
			if c.Equal(ca) {
				return s.at.Format("15:04:05.000")
			}
		}
	}
	return "never"
}

// firstServed is when leaf was first served ("never" if it was not).
func firstServed(served []servedSample, leaf *x509.Certificate) string {
	for _, s := range served {
		if s.leaf.Equal(leaf) {
			return s.at.Format("15:04:05.000")
		}
	}
	return "never"
}
