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
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
	"github.com/gauntlet-dev/gauntlet/operator/internal/scheme"
)

// The manager runs the Controller on every replica and probes its readiness.
var (
	_ manager.Runnable               = (*Controller)(nil)
	_ manager.LeaderElectionRunnable = (*Controller)(nil)
	_ healthz.Checker                = (&Controller{}).ReadyCheck
)

// logPrefix marks every message of the built-in cert-controller, so users (and the T10
// scenario) can find its errors among the operator's logs.
const logPrefix = "cert-controller: "

// waitLogEvery paces the "still waiting for the mounted certificate" messages.
const waitLogEvery = 5 * time.Second

// Controller provides the webhook serving certificate. Call Bootstrap before the manager
// starts, then pass TLSConfig to the webhook server, add the Controller to the manager (it is
// a Runnable) and ReadyCheck as a readiness check.
type Controller struct {
	opts   Options
	client client.WithWatch
	log    logr.Logger

	// retry is the back-off after a failed attempt (500 ms, doubling up to the check interval
	// or 30 s): each retry loop steps a copy of it and starts over from it after a success.
	// overlapFor is how long the previous CA stays in the injected bundles after a CA change.
	retry      wait.Backoff
	overlapFor time.Duration

	mu      sync.RWMutex
	files   ServingFiles
	watcher *certwatcher.CertWatcher

	// State of the automatic mode, used only by the goroutine running Bootstrap and then Start.
	lastCA   []byte
	overlap  *caOverlap
	reported map[string]string
	retryNow bool // Bootstrap left something (an injection) to retry
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
	}
	return &Controller{
		opts:       opts,
		client:     cl,
		log:        log,
		retry:      wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: min(opts.CheckInterval, 30*time.Second)},
		overlapFor: opts.CheckInterval,
		reported:   map[string]string{},
	}, nil
}

// Bootstrap blocks until the serving certificate files exist and load, so the webhook server
// never starts without a certificate. In automatic mode it makes sure the Secret holds a valid
// certificate (reusing it, or generating and storing a new one), writes the files and injects
// the CA; a failed injection is logged and retried by Start rather than holding up serving.
// In the other modes it waits for the mounted files, logging what it waits for. It retries
// until ctx is done.
func (c *Controller) Bootstrap(ctx context.Context) error {
	var files ServingFiles
	var err error
	if c.opts.Mode == ModeAutomatic {
		files, err = c.bootstrapAutomatic(ctx)
	} else {
		files, err = c.waitForMountedFiles(ctx)
	}
	if err != nil {
		return err
	}
	w, err := certwatcher.New(files.CertFile, files.KeyFile)
	if err != nil {
		return fmt.Errorf("loading webhook serving certificate %s and key %s: %w", files.CertFile, files.KeyFile, err)
	}
	w.RegisterCallback(recordExpiry)
	c.mu.Lock()
	c.files, c.watcher = files, w
	c.mu.Unlock()
	c.log.Info("webhook serving certificate loaded", "mode", c.opts.Mode, "cert", files.CertFile, "key", files.KeyFile)
	return nil
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
// files current. Concurrent writers are safe (optimistic concurrency on the Secret).
func (c *Controller) NeedLeaderElection() bool { return false }

// Start runs until ctx is done: it reloads the served files when they change (certwatcher)
// and, in automatic mode, keeps the Secret, the files and the caBundles right, reacting to
// Secret changes at once and re-checking everything every CheckInterval. Bootstrap must
// have succeeded first.
func (c *Controller) Start(ctx context.Context) error {
	c.mu.RLock()
	w, files := c.watcher, c.files
	c.mu.RUnlock()
	if w == nil {
		return errors.New("webhook certificate controller started before Bootstrap loaded a certificate")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if c.opts.Mode == ModeAutomatic {
		wg.Go(func() { c.maintain(ctx) })
	}
	err := w.Start(ctx)
	cancel()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("watching webhook serving certificate %s and key %s: %w", files.CertFile, files.KeyFile, err)
	}
	return nil
}
