package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"

	certutil "k8s.io/client-go/util/cert"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretWriteAttempts bounds the read-validate-write loop when other replicas keep winning
// the race for the Secret.
const secretWriteAttempts = 5

// caOverlap keeps the previous CA trusted for a while after the CA changed, so a replica
// still serving the old certificate (or this one, until certwatcher reloads) keeps working.
type caOverlap struct {
	caPEM  []byte // the ca.crt this overlap was made for
	bundle []byte // caPEM followed by the previous CA
	until  time.Time
}

// reconcile is the leader's pass: it makes the Secret valid (generating a new certificate when
// it is missing or unusable), injects the CA and writes the serving files. serving reports
// whether the files are in place (injection errors don't change that).
//
// The rotation protocol: a certificate signed by a CA is served only once every caBundle has
// held that CA for CAPropagation. The API server reads webhook configurations and CRDs through
// an informer, so its view lags the objects; under load, by a second or more. A leaf served
// the moment the CA is injected can reach an API server that does not trust it yet: the
// admission fails with "x509: certificate signed by unknown authority".
func (c *Controller) reconcile(ctx context.Context) (serving bool, errs []error) {
	// Trust first, store second: a new CA is in every caBundle, for CAPropagation, before the
	// Secret holds it, so no replica (they serve what the Secret holds) ever serves a
	// certificate the API server does not trust yet. Meanwhile the old certificate is served.
	b, replacedCA, err := c.ensureSecret(ctx, func(newCA, replacedCA []byte) error {
		errs = c.injectAll(ctx, c.bundleFor(newCA, replacedCA, time.Now()))
		if len(errs) > 0 {
			return nil // not trusted anywhere it failed: waiting would not make it so
		}
		return c.awaitPropagation(ctx, "storing it in the Secret")
	})
	if err != nil {
		return false, append(errs, err)
	}
	// Trust first, serve second: the bundle already holds the CA when this replica starts
	// serving a certificate signed by it. (After a generation this finds nothing to change.) A
	// CA this replica is about to serve that a caBundle lacked (a Secret replaced by hand, a
	// caBundle emptied before a restart) waits for the API server too.
	switching := !bytes.Equal(b.caPEM, c.lastCA)
	trustedBefore := false
	if switching {
		trustedBefore, _ = c.trusted(ctx, b) // unreadable counts as untrusted: wait
	}
	errs = c.injectAll(ctx, c.bundleFor(b.caPEM, replacedCA, time.Now()))
	if switching && !trustedBefore && len(errs) == 0 {
		if err := c.awaitPropagation(ctx, "serving it"); err != nil {
			return false, append(errs, err)
		}
	}
	if err := c.serve(b); err != nil {
		return false, append(errs, err)
	}
	return true, errs
}

// awaitPropagation waits CAPropagation after a CA entered every caBundle, before that CA's
// certificate is stored (next) or served: the time the API server's informers are given to see
// the new bundles.
func (c *Controller) awaitPropagation(ctx context.Context, next string) error {
	if c.opts.CAPropagation <= 0 {
		return nil
	}
	c.log.Info(logPrefix+"new CA injected; waiting for the API server to see it before "+next, "for", c.opts.CAPropagation.String())
	t := time.NewTimer(c.opts.CAPropagation)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("waiting %s for the new CA to propagate: %w", c.opts.CAPropagation, ctx.Err())
	case <-t.C:
		return nil
	}
}

// serve writes b's certificate and key where the webhook server reads them; b's CA is then
// the one this replica serves with.
func (c *Controller) serve(b *servingBundle) error {
	changed, err := writeFilesAtomically(c.opts.CertDir, map[string][]byte{keyTLSCert: b.certPEM, keyTLSKey: b.keyPEM})
	if err != nil {
		return fmt.Errorf("writing serving certificate files to %s: %w", c.opts.CertDir, err)
	}
	if changed {
		c.log.Info(logPrefix+"wrote serving certificate files", "dir", c.opts.CertDir, "certificate", b.String())
	}
	c.lastCA = b.caPEM
	return nil
}

// bundleFor is the caBundle to inject for the CA ca: ca itself and, for overlapFor after a CA
// change, the CAs a replica may still serve with — the one this replica served (lastCA) and
// replacedCA, the CA of a replaced Secret whose certificate was servable. Nothing else: a
// Secret the operator rejected (wrong SANs, say) was never served, so its CA is never trusted.
func (c *Controller) bundleFor(ca, replacedCA []byte, now time.Time) []byte {
	var previous []byte
	previous = append(previous, replacedCA...)
	if !bytes.Equal(c.lastCA, ca) {
		previous = append(previous, c.lastCA...)
	}
	if o := c.overlap; len(previous) > 0 && (o == nil || !bytes.Equal(o.caPEM, ca)) {
		if extra := stillValidCAs(previous, ca, now); len(extra) > 0 {
			c.overlap = &caOverlap{caPEM: ca, bundle: append(append([]byte{}, ca...), extra...), until: now.Add(c.overlapFor)}
			c.log.Info(logPrefix+"CA changed; the webhook configurations trust the previous CA too for a while", "secret", c.opts.secretRef(), "for", c.overlapFor.String())
		}
	}
	if o := c.overlap; o != nil {
		if bytes.Equal(o.caPEM, ca) && now.Before(o.until) {
			return o.bundle
		}
		c.overlap = nil
	}
	return ca
}

// ensureSecret returns a valid bundle from the Secret, generating and storing a new one when
// the Secret is missing or unusable; trust runs with the new CA before it is stored. replacedCA
// is the ca.crt this call overwrote if that Secret's certificate was usable now (only the
// look-ahead failed), so some replica may have served it; a Secret no replica could serve
// contributes nothing. trust's error (the wait cut short) stops before the Secret is written.
// Replicas racing here (without leader election) converge: a lost create
// (AlreadyExists) or update (Conflict) re-reads the winner's Secret, which then validates and
// is reused.
func (c *Controller) ensureSecret(ctx context.Context, trust func(newCA, replacedCA []byte) error) (b *servingBundle, replacedCA []byte, err error) {
	ref := c.opts.secretRef()
	for range secretWriteAttempts {
		var s corev1.Secret
		err := c.client.Get(ctx, client.ObjectKey{Namespace: c.opts.Namespace, Name: c.opts.SecretName}, &s)
		if apierrors.IsNotFound(err) {
			b, err := generateBundle(&c.opts, time.Now())
			if err != nil {
				return nil, nil, fmt.Errorf("generating a certificate for Secret %s: %w", ref, err)
			}
			s = corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: c.opts.Namespace, Name: c.opts.SecretName},
				Type:       corev1.SecretTypeTLS,
				Data:       b.secretData(),
			}
			if err := trust(b.caPEM, nil); err != nil {
				return nil, nil, err
			}
			err = c.client.Create(ctx, &s)
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("creating Secret %s: %w", ref, err)
			}
			c.log.Info(logPrefix+"created Secret with a new CA and serving certificate", "secret", ref, "certificate", b.String())
			return b, nil, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("getting Secret %s: %w", ref, err)
		}

		now := time.Now()
		b, reason := loadBundle(s.Data, &c.opts, now)
		if reason == nil {
			return b, nil, nil
		}
		c.log.Info(logPrefix+"Secret is not usable; generating a new CA and serving certificate", "secret", ref, "reason", reason.Error())
		var replaced []byte
		if _, notServable := loadBundle(s.Data, c.servableNow(), now); notServable == nil {
			replaced = s.Data[keyCACert]
		}
		b, err = generateBundle(&c.opts, now)
		if err != nil {
			return nil, nil, fmt.Errorf("generating a certificate for Secret %s: %w", ref, err)
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		for k, v := range b.secretData() {
			s.Data[k] = v
		}
		if err := trust(b.caPEM, replaced); err != nil {
			return nil, nil, err
		}
		// The Secret's resourceVersion makes this update fail if anyone changed it since the read.
		err = c.client.Update(ctx, &s)
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("updating Secret %s: %w", ref, err)
		}
		c.log.Info(logPrefix+"updated Secret with a new CA and serving certificate", "secret", ref, "certificate", b.String())
		return b, replaced, nil
	}
	return nil, nil, fmt.Errorf("updating Secret %s: still conflicting with other writers after %d attempts", ref, secretWriteAttempts)
}

// servableNow are the options a certificate must meet to be served at all: those of a reused
// one without the look-ahead.
func (c *Controller) servableNow() *Options {
	o := c.opts
	o.LookAhead = 0
	return &o
}

// follow is the pass of a replica that is not the leader: it serves the Secret's certificate
// when it is usable now and, with gate (once this replica serves something), when every
// caBundle already trusts its CA — the leader injects a new CA CAPropagation before it stores
// it, and a Secret written by hand waits for the leader's injection, then CAPropagation. It
// never writes the Secret and only adds trust (at startup) to a caBundle. pending says it is
// waiting for the leader (retry soon).
func (c *Controller) follow(ctx context.Context, gate bool) (serving, pending bool, errs []error) {
	ref := c.opts.secretRef()
	var s corev1.Secret
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: c.opts.Namespace, Name: c.opts.SecretName}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			c.reportOnce("secret", "missing", logPrefix+"Secret not found; waiting for the leader to create it", "secret", ref)
			return c.isLoaded(), true, nil
		}
		return c.isLoaded(), false, []error{fmt.Errorf("getting Secret %s: %w", ref, err)}
	}
	b, reason := loadBundle(s.Data, c.servableNow(), time.Now())
	if reason != nil {
		c.reportOnce("secret", "unusable: "+reason.Error(), logPrefix+"Secret is not usable; waiting for the leader to replace it",
			"secret", ref, "reason", reason.Error())
		return c.isLoaded(), true, nil
	}
	if gate && !bytes.Equal(b.caPEM, c.lastCA) {
		trusted, err := c.trusted(ctx, b)
		switch {
		case err != nil:
			// Serving beats waiting on what cannot be read: the leader repairs the caBundles.
			errs = append(errs, err)
		case !trusted:
			c.untrustedCA = b.caPEM
			c.reportOnce("secret", "untrusted: "+b.String(), logPrefix+"Secret holds a new CA the caBundles do not trust yet; waiting for the leader to inject it",
				"secret", ref, "certificate", b.String())
			return c.isLoaded(), true, errs
		case bytes.Equal(c.untrustedCA, b.caPEM):
			// The leader injected it since this replica last looked, just now for all it knows.
			if err := c.awaitPropagation(ctx, "serving it"); err != nil {
				return c.isLoaded(), false, append(errs, err)
			}
		}
	}
	c.untrustedCA = nil
	if c.reported["secret"] != "" {
		delete(c.reported, "secret")
	}
	if !gate {
		// At startup a replica injects before it serves, leader or not: a restart is the
		// documented fix for an emptied or foreign caBundle (T3), and the leader may still be
		// the stopping pod. Only adding trust in the Secret's CA, never removing any, is safe
		// beside the leader; trust it added is given time to reach the API server.
		added, trustErrs := c.addTrust(ctx, b)
		errs = append(errs, trustErrs...)
		if added && len(trustErrs) == 0 {
			if err := c.awaitPropagation(ctx, "serving it"); err != nil {
				return false, false, append(errs, err)
			}
		}
	}
	if err := c.serve(b); err != nil {
		return false, false, append(errs, err)
	}
	return true, false, errs
}

// addTrust appends b's CA to every caBundle that does not hold it, keeping what the bundle
// trusts already. added says it changed at least one.
func (c *Controller) addTrust(ctx context.Context, b *servingBundle) (added bool, errs []error) {
	for _, o := range c.injectTargets() {
		obj := o.newObj()
		if err := c.client.Get(ctx, client.ObjectKey{Name: o.name}, obj); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("getting %s %s: %w", o.kind, o.name, err))
			}
			continue
		}
		var bundle []byte
		missing := false
		for _, cur := range caBundlesOf(obj) {
			if bundleHolds(cur, b.ca) {
				bundle = cur
				continue
			}
			missing = true
		}
		if !missing {
			continue
		}
		if bundle == nil { // none holds it: keep the first bundle's CAs and add the Secret's
			if all := caBundlesOf(obj); len(all) > 0 && len(all[0]) > 0 {
				bundle = append(bytes.TrimRight(append([]byte{}, all[0]...), "\n"), '\n')
				bundle = append(bundle, b.caPEM...)
			} else {
				bundle = b.caPEM
			}
		}
		if err := c.inject(ctx, o.kind, o.name, o.newObj, bundle); err != nil {
			errs = append(errs, err)
			continue
		}
		added = true
	}
	return added, errs
}

// trusted reports whether every caBundle this operator injects holds b's CA. Objects that do
// not exist (yet) are left out.
func (c *Controller) trusted(ctx context.Context, b *servingBundle) (bool, error) {
	for _, o := range c.injectTargets() {
		obj := o.newObj()
		if err := c.client.Get(ctx, client.ObjectKey{Name: o.name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("getting %s %s: %w", o.kind, o.name, err)
		}
		for _, bundle := range caBundlesOf(obj) {
			if !bundleHolds(bundle, b.ca) {
				return false, nil
			}
		}
	}
	return true, nil
}

// bundleHolds reports whether the PEM bundle contains ca.
func bundleHolds(bundle []byte, ca *x509.Certificate) bool {
	certs, err := certutil.ParseCertsPEM(bundle)
	if err != nil {
		return false
	}
	for _, c := range certs {
		if c.Equal(ca) {
			return true
		}
	}
	return false
}

// stillValidCAs returns, as PEM, the unexpired CA certificates of previous that current
// doesn't already hold, each once. Unparseable input yields nothing.
func stillValidCAs(previous, current []byte, now time.Time) []byte {
	prev, err := certutil.ParseCertsPEM(previous)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	if cur, err := certutil.ParseCertsPEM(current); err == nil {
		for _, c := range cur {
			seen[string(c.Raw)] = true
		}
	}
	var out []byte
	for _, p := range prev {
		if !p.IsCA || !now.Before(p.NotAfter) || seen[string(p.Raw)] {
			continue
		}
		seen[string(p.Raw)] = true
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Raw})...)
	}
	return out
}

// injectTarget is an object whose webhooks read the CA this operator injects.
type injectTarget struct {
	kind, name string
	newObj     func() client.Object
}

// injectTargets are the configured webhook configurations and conversion CRDs.
func (c *Controller) injectTargets() []injectTarget {
	var out []injectTarget
	for _, name := range c.opts.ValidatingWebhookConfigurations {
		out = append(out, injectTarget{"ValidatingWebhookConfiguration", name, func() client.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} }})
	}
	for _, name := range c.opts.MutatingWebhookConfigurations {
		out = append(out, injectTarget{"MutatingWebhookConfiguration", name, func() client.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} }})
	}
	for _, name := range c.opts.ConversionCRDs {
		out = append(out, injectTarget{"CustomResourceDefinition", name, func() client.Object { return &apiextensionsv1.CustomResourceDefinition{} }})
	}
	return out
}

// injectAll puts bundle into every configured webhook configuration and conversion CRD.
// Objects are read by name and updated with optimistic concurrency: a restricted operator may
// only get/update its own configurations, never list or watch them.
func (c *Controller) injectAll(ctx context.Context, bundle []byte) []error {
	var errs []error
	for _, o := range c.injectTargets() {
		errs = appendErr(errs, c.inject(ctx, o.kind, o.name, o.newObj, bundle))
	}
	return errs
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

func (c *Controller) inject(ctx context.Context, kind, name string, newObj func() client.Object, bundle []byte) error {
	key := kind + "/" + name
	var updated int
	action := "getting"
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		action = "getting"
		obj := newObj() // fresh each attempt: decoding into a used object would merge stale maps
		if err := c.client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		updated = setCABundle(obj, bundle)
		if updated <= 0 {
			return nil
		}
		action = "updating caBundle of"
		return c.client.Update(ctx, obj)
	})
	switch {
	case apierrors.IsNotFound(err):
		// Not fatal: the chart may not have created it yet, or it was deleted (T1); the
		// periodic check injects it once it (re)appears.
		c.reportOnce(key, "missing", logPrefix+"object to inject the CA into not found; will retry", "object", key)
		return nil
	case err != nil:
		return fmt.Errorf("%s %s %s: %w", action, kind, name, err)
	case updated < 0:
		c.reportOnce(key, "no-webhook", logPrefix+"CRD has no conversion webhook; nothing to inject", "object", key)
		return nil
	}
	if c.reported[key] != "" {
		delete(c.reported, key)
	}
	if updated > 0 {
		c.log.Info(logPrefix+"injected CA bundle", "object", key, "webhooks", updated)
	}
	return nil
}

// setCABundle sets bundle wherever obj's webhooks read a CA from and returns how many
// places changed, or -1 if obj has no webhook client config to set.
func setCABundle(obj client.Object, bundle []byte) int {
	n := 0
	set := func(cur *[]byte) {
		if !bytes.Equal(*cur, bundle) {
			*cur = append([]byte{}, bundle...)
			n++
		}
	}
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			set(&o.Webhooks[i].ClientConfig.CABundle)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			set(&o.Webhooks[i].ClientConfig.CABundle)
		}
	case *apiextensionsv1.CustomResourceDefinition:
		conv := o.Spec.Conversion
		if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
			return -1
		}
		set(&conv.Webhook.ClientConfig.CABundle)
	}
	return n
}

// caBundlesOf returns every caBundle obj's webhooks read (none for a CRD without a conversion
// webhook).
func caBundlesOf(obj client.Object) [][]byte {
	var out [][]byte
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for _, w := range o.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for _, w := range o.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	case *apiextensionsv1.CustomResourceDefinition:
		if conv := o.Spec.Conversion; conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
			out = append(out, conv.Webhook.ClientConfig.CABundle)
		}
	}
	return out
}

// reportOnce logs a steady, non-error condition once until it changes.
func (c *Controller) reportOnce(key, state, msg string, kv ...any) {
	if c.reported[key] == state {
		return
	}
	c.reported[key] = state
	c.log.Info(msg, kv...)
}

// logErrors logs each failure on its own line, naming the object and the action; RBAC
// denials get a hint, since they are fixed by the chart, not by waiting.
func (c *Controller) logErrors(errs []error) {
	for _, err := range errs {
		if apierrors.IsForbidden(err) {
			c.log.Error(err, logPrefix+"forbidden by RBAC; grant the operator's ServiceAccount the chart's cert-controller permissions; retrying")
			continue
		}
		c.log.Error(err, logPrefix+"reconciling the webhook certificate failed; retrying")
	}
}

// maintain re-checks on every change of the Secret and every CheckInterval, retrying failures
// with back-off, until ctx is done.
func (c *Controller) maintain(ctx context.Context) {
	changed := make(chan struct{}, 1)
	go c.watchSecret(ctx, changed)
	retry := c.retry
	first := c.opts.CheckInterval
	if c.retryNow {
		first = retry.Step()
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-c.wake:
		case <-timer.C:
		}
		errs, pending := c.pass(ctx)
		if ctx.Err() != nil {
			return
		}
		c.logErrors(errs)
		next := c.opts.CheckInterval
		if len(errs) > 0 || pending {
			next = retry.Step()
		} else {
			retry = c.retry
		}
		timer.Reset(next)
	}
}

// pass is one round of the automatic mode: the leader's reconcile, or a follower's follow.
// The first certificate it puts in place is loaded for serving. pending: a follower waits for
// the leader.
func (c *Controller) pass(ctx context.Context) (errs []error, pending bool) {
	var serving bool
	c.leaderMu.Lock()
	if c.leading.Load() {
		serving, errs = c.reconcile(ctx)
	} else {
		serving, pending, errs = c.follow(ctx, c.isLoaded())
	}
	c.leaderMu.Unlock()
	if serving && !c.isLoaded() {
		if err := c.load(c.automaticFiles()); err != nil {
			errs = append(errs, err)
		}
	}
	return errs, pending
}

// watchSecret signals changed for every event on the Secret. The watch is narrowed to the
// Secret's name so RBAC with resourceNames allows it.
func (c *Controller) watchSecret(ctx context.Context, changed chan<- struct{}) {
	retry := c.retry
	for ctx.Err() == nil {
		w, err := c.client.Watch(ctx, &corev1.SecretList{}, client.InNamespace(c.opts.Namespace),
			client.MatchingFields{"metadata.name": c.opts.SecretName})
		if err != nil {
			c.logErrors([]error{fmt.Errorf("watching Secret %s: %w", c.opts.secretRef(), err)})
		} else {
			if c.drain(ctx, w, changed) {
				retry = c.retry
			}
			w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-time.After(retry.Step()):
		}
	}
}

// drain forwards a watch's events until it ends; it reports whether any event arrived.
func (c *Controller) drain(ctx context.Context, w watch.Interface, changed chan<- struct{}) bool {
	got := false
	for {
		select {
		case <-ctx.Done():
			return got
		case ev, ok := <-w.ResultChan():
			if !ok {
				return got
			}
			if ev.Type == watch.Error {
				c.logErrors([]error{fmt.Errorf("watching Secret %s: %w", c.opts.secretRef(), apierrors.FromObject(ev.Object))})
				return got
			}
			got = true
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
}
