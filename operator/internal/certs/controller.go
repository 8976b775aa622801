// Package certs provides the webhook server's serving certificate in the three documented
// modes. In automatic mode it is the built-in cert-controller: it keeps a self-signed CA and
// serving certificate in a kubernetes.io/tls Secret, writes them where the webhook server reads
// them, and injects the CA into the webhook configurations and conversion CRDs, at startup and
// whenever anything drifts. In cert-manager and external mode it only waits for the mounted
// files. In every mode controller-runtime's certwatcher serves the files and reloads them when
// they change, so renewals never need a restart.
package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
	"github.com/gauntlet-dev/gauntlet/operator/internal/scheme"
)

// The manager runs the Controller on every replica and probes its readiness; with leader
// election, the leader also runs Leader().
var (
	_ manager.Runnable               = (*Controller)(nil)
	_ manager.LeaderElectionRunnable = (*Controller)(nil)
	_ manager.LeaderElectionRunnable = leader{}
	_ healthz.Checker                = (&Controller{}).ReadyCheck
	_ webhook.Server                 = (*gatedServer)(nil)
)

// logPrefix marks every message of the built-in cert-controller, so users (and the T10
// scenario) can find its errors among the operator's logs.
const logPrefix = "cert-controller: "

// waitLogEvery paces the "still waiting for the mounted certificate" messages.
const waitLogEvery = 5 * time.Second

// Controller provides the webhook serving certificate. Call Bootstrap before the manager
// starts, then pass TLSConfig to the webhook server (wrapped by GateWebhookServer), add the
// Controller and Leader() to the manager (they are Runnables) and ReadyCheck as a readiness
// check.
//
// In automatic mode with Options.LeaderElection, only the replica holding the manager's leader
// Lease generates certificates, writes the Secret and injects caBundles (Leader() marks it);
// every replica serves the certificate the Secret holds, written to its own files.
type Controller struct {
	opts   Options
	client client.WithWatch
	log    logr.Logger

	// retry is the back-off after a failed attempt (500 ms, doubling up to the check interval
	// or 30 s): each retry loop steps a copy of it and starts over from it after a success.
	// overlapFor is how long the previous CA stays in the injected bundles after a CA change:
	// CAPropagation before the Secret holds the new CA, a check interval for every replica to
	// switch to it, and CAPropagation more for the last of them to reload its files.
	retry      wait.Backoff
	overlapFor time.Duration

	mu      sync.RWMutex
	files   ServingFiles
	watcher *certwatcher.CertWatcher
	// loaded is closed once a certificate is loaded (watcher set).
	loaded chan struct{}

	// leading: this replica generates, stores and injects (always, without leader election).
	// leaderMu is held for a pass of the maintain loop, so leadership is never given up in
	// the middle of a write. wake starts a pass at once when leadership is gained.
	leading  atomic.Bool
	leaderMu sync.Mutex
	wake     chan struct{}

	// State of the automatic mode, used only by the goroutine running Bootstrap and then Start.
	lastCA  []byte
	overlap *caOverlap
	// untrustedCA is the Secret's CA a follower last found missing from a caBundle: once it
	// is trusted, it is served only after CAPropagation.
	untrustedCA []byte
	reported    map[string]string
	retryNow    bool // Bootstrap left something (an injection) to retry
}

// New validates the options and builds a Controller. In automatic mode it talks to the API
// server through cfg directly (no cache: it runs before the manager's cache exists, and only
// ever reads a few objects by name, which is all a namespace-restricted operator may do). In
// the other modes it has no API client at all (cfg may be nil), so it cannot write the Secret
// or a caBundle.
func New(cfg *rest.Config, opts Options, log logr.Logger) (*Controller, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("invalid webhook certificate options: %w", err)
	}
	var cl client.WithWatch
	if opts.Mode == ModeAutomatic {
		var err error
		if cl, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()}); err != nil {
			return nil, fmt.Errorf("building the API client for the webhook certificate controller: %w", err)
		}
		if opts.FieldOwner != "" {
			cl = ownedClient{Client: client.WithFieldOwner(cl, opts.FieldOwner), watcher: cl}
		}
	}
	c := &Controller{
		opts:       opts,
		client:     cl,
		log:        log,
		retry:      wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: min(opts.CheckInterval, 30*time.Second)},
		overlapFor: 2*opts.CAPropagation + opts.CheckInterval,
		reported:   map[string]string{},
		loaded:     make(chan struct{}),
		wake:       make(chan struct{}, 1),
	}
	c.leading.Store(!opts.LeaderElection)
	return c, nil
}

// ownedClient writes as Options.FieldOwner; controller-runtime's WithFieldOwner returns a
// client without Watch, which the Secret watch needs (a watch writes nothing).
type ownedClient struct {
	client.Client
	watcher client.WithWatch
}

func (c ownedClient) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	return c.watcher.Watch(ctx, list, opts...)
}

// Bootstrap prepares the serving certificate before the manager starts, so the webhook server
// never starts without one. In automatic mode as the only writer (no leader election) it makes
// sure the Secret holds a valid certificate (reusing it, or generating and storing a new one),
// injects the CA and writes the files, retrying until it serves; a failed injection is logged
// and retried by Start rather than holding up serving. With leader election it serves the
// Secret's certificate if it is usable now — at once, whoever leads — and otherwise returns
// without a certificate: generating one is the leader's, which begins when the manager runs,
// and Start loads it then (GateWebhookServer holds the server until it does). In the other
// modes it waits for the mounted files, logging what it waits for. It retries until ctx is
// done.
func (c *Controller) Bootstrap(ctx context.Context) error {
	var files ServingFiles
	var err error
	switch {
	case c.opts.Mode != ModeAutomatic:
		files, err = c.waitForMountedFiles(ctx)
	case c.leading.Load():
		files, err = c.bootstrapAutomatic(ctx)
	default:
		serving, _, errs := c.follow(ctx, false)
		if ctx.Err() != nil {
			return fmt.Errorf("bootstrapping the webhook serving certificate in Secret %s: %w", c.opts.secretRef(), ctx.Err())
		}
		c.logErrors(errs)
		if !serving {
			c.retryNow = true
			c.log.Info(logPrefix+"no usable certificate in the Secret yet; serving starts once the leader has stored one", "secret", c.opts.secretRef())
			return nil
		}
		files = c.automaticFiles()
	}
	if err != nil {
		return err
	}
	return c.load(files)
}

// load starts serving files: it loads them into a certwatcher (which Start runs).
func (c *Controller) load(files ServingFiles) error {
	if c.isLoaded() {
		return nil
	}
	w, err := certwatcher.New(files.CertFile, files.KeyFile)
	if err != nil {
		return fmt.Errorf("loading webhook serving certificate %s and key %s: %w", files.CertFile, files.KeyFile, err)
	}
	w.RegisterCallback(recordExpiry)
	c.mu.Lock()
	c.files, c.watcher = files, w
	c.mu.Unlock()
	close(c.loaded)
	c.log.Info("webhook serving certificate loaded", "mode", c.opts.Mode, "cert", files.CertFile, "key", files.KeyFile)
	return nil
}

// isLoaded reports whether a certificate is loaded.
func (c *Controller) isLoaded() bool {
	select {
	case <-c.loaded:
		return true
	default:
		return false
	}
}

func recordExpiry(cert tls.Certificate) {
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return
		}
	}
	metrics.CertificateNotAfter.Set(float64(leaf.NotAfter.Unix()))
}

func (c *Controller) bootstrapAutomatic(ctx context.Context) (ServingFiles, error) {
	retry := c.retry
	var last error
	for {
		serving, errs := c.reconcile(ctx)
		if serving {
			c.logErrors(errs)
			c.retryNow = len(errs) > 0
			return c.automaticFiles(), nil
		}
		// An attempt cut short by ctx says nothing new; keep the real cause for the error.
		if ctx.Err() == nil {
			c.logErrors(errs)
			last = errors.Join(errs...)
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = errors.Join(errs...)
			}
			return ServingFiles{}, fmt.Errorf("bootstrapping the webhook serving certificate in Secret %s: %w (last error: %w)", c.opts.secretRef(), ctx.Err(), last)
		case <-time.After(retry.Step()):
		}
	}
}

func (c *Controller) automaticFiles() ServingFiles {
	return servingFileCandidates(c.opts.CertDir, "")[0]
}

func (c *Controller) waitForMountedFiles(ctx context.Context) (ServingFiles, error) {
	start := time.Now()
	var lastLog time.Time
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		files, err := ResolveServingFiles(c.opts.CertDir, c.opts.OLMCertDir)
		if err == nil {
			if _, err = tls.LoadX509KeyPair(files.CertFile, files.KeyFile); err == nil {
				return files, nil
			}
			err = fmt.Errorf("loading %s and %s: %w", files.CertFile, files.KeyFile, err)
		}
		if time.Since(lastLog) >= waitLogEvery {
			lastLog = time.Now()
			kv := []any{"mode", c.opts.Mode, "dir", c.opts.CertDir, "waited", time.Since(start).Round(time.Second).String(), "problem", err.Error()}
			if c.opts.SecretName != "" {
				kv = append(kv, "secret", c.opts.secretRef())
			}
			c.log.Info("waiting for the webhook serving certificate to be mounted", kv...)
		}
		select {
		case <-ctx.Done():
			return ServingFiles{}, fmt.Errorf("waiting for the webhook serving certificate in %s: %w (last problem: %w)", c.opts.CertDir, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// TLSConfig sets the webhook server's certificate source; pass it in webhook.Options.TLSOpts.
// Before Bootstrap there is nothing to serve, and handshakes fail.
func (c *Controller) TLSConfig(cfg *tls.Config) {
	cfg.GetCertificate = c.getCertificate
}

func (c *Controller) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.RLock()
	w := c.watcher
	c.mu.RUnlock()
	if w == nil {
		return nil, errors.New("webhook serving certificate not loaded yet")
	}
	return w.GetCertificate(hello)
}

// ServingFiles returns the files being served (empty before Bootstrap).
func (c *Controller) ServingFiles() ServingFiles {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.files
}

// ReadyCheck is a healthz.Checker: ready once a serving certificate is loaded.
func (c *Controller) ReadyCheck(_ *http.Request) error {
	c.mu.RLock()
	w := c.watcher
	c.mu.RUnlock()
	if w == nil {
		return errors.New("webhook serving certificate not loaded yet")
	}
	if cert, _ := w.GetCertificate(nil); cert == nil {
		return errors.New("webhook serving certificate not loaded yet")
	}
	return nil
}

// NeedLeaderElection is false: every replica serves webhooks, so every replica keeps its own
// files current. The singleton part (generating, storing, injecting) is Leader()'s.
func (c *Controller) NeedLeaderElection() bool { return false }

// Start runs until ctx is done: it reloads the served files when they change (certwatcher)
// and, in automatic mode, keeps the files right — and, while leading, the Secret and the
// caBundles — reacting to Secret changes at once and re-checking everything every
// CheckInterval. Bootstrap must have run first; in automatic mode with leader election it may
// have left the certificate to be loaded here.
func (c *Controller) Start(ctx context.Context) error {
	if c.opts.Mode != ModeAutomatic && !c.isLoaded() {
		return errors.New("webhook certificate controller started before Bootstrap loaded a certificate")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	if c.opts.Mode == ModeAutomatic {
		wg.Go(func() { c.maintain(ctx) })
	}
	select {
	case <-c.loaded:
	case <-ctx.Done():
		return nil
	}
	c.mu.RLock()
	w, files := c.watcher, c.files
	c.mu.RUnlock()
	if err := w.Start(ctx); err != nil {
		return fmt.Errorf("watching webhook serving certificate %s and key %s: %w", files.CertFile, files.KeyFile, err)
	}
	return nil
}

// Leader returns the Runnable that makes this replica the one that generates certificates,
// writes the Secret and injects caBundles, for as long as the manager runs it: the manager
// starts it on the replica that holds the leader Lease (it needs leader election) and stops it
// before that replica lets the Lease go. Without Options.LeaderElection, or in the other
// modes, it does nothing.
func (c *Controller) Leader() manager.Runnable { return leader{c} }

type leader struct{ c *Controller }

func (leader) NeedLeaderElection() bool { return true }

func (l leader) Start(ctx context.Context) error {
	c := l.c
	if c.opts.Mode != ModeAutomatic || !c.opts.LeaderElection {
		<-ctx.Done()
		return nil
	}
	c.leaderMu.Lock()
	c.leading.Store(true)
	c.leaderMu.Unlock()
	c.log.Info(logPrefix+"elected leader: this replica keeps the Secret and the caBundles right", "secret", c.opts.secretRef())
	select {
	case c.wake <- struct{}{}:
	default:
	}
	<-ctx.Done()
	c.leaderMu.Lock() // waits for a pass in progress
	c.leading.Store(false)
	c.leaderMu.Unlock()
	c.log.Info(logPrefix + "no longer leading")
	return nil
}

// GateWebhookServer returns s, starting only once a serving certificate is loaded: with leader
// election a replica may start its manager without one (the leader generates it), and the
// server must not accept connections it cannot complete. Readiness waits for it either way.
func (c *Controller) GateWebhookServer(s webhook.Server) webhook.Server {
	return &gatedServer{Server: s, loaded: c.loaded}
}

type gatedServer struct {
	webhook.Server
	loaded <-chan struct{}
}

func (g *gatedServer) Start(ctx context.Context) error {
	select {
	case <-g.loaded:
	case <-ctx.Done():
		return nil
	}
	return g.Server.Start(ctx)
}
