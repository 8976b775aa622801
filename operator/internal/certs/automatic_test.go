package certs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
)

const tenYears = 10 * 365 * 24 * time.Hour

func (f *fixture) host() string { return f.svc + "." + f.ns + ".svc" }

// createSecret stores data as the webhook Secret, as a user or a previous install would.
func (f *fixture) createSecret(data map[string][]byte) {
	f.t.Helper()
	must(f.t, f.env.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.secret},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	}))
}

// replaceSecret overwrites the Secret's data, as `kubectl apply` of another certificate would.
func (f *fixture) replaceSecret(data map[string][]byte) {
	f.t.Helper()
	updateRetrying(f.t, f.env.Client, client.ObjectKey{Namespace: f.ns, Name: f.secret}, func(s *corev1.Secret) { s.Data = data })
}

// generateFor makes a valid bundle for this fixture's Service, as another issuer would.
func (f *fixture) generateFor(mod func(*Options)) *servingBundle {
	f.t.Helper()
	o := f.options()
	o.setDefaults()
	if mod != nil {
		mod(&o)
	}
	b, err := generateBundle(&o, time.Now())
	must(f.t, err)
	return b
}

func gaugeValue(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	must(t, metrics.CertificateNotAfter.Write(&m))
	return m.GetGauge().GetValue()
}

func TestAutomaticMode(t *testing.T) {
	t.Run("C1 fresh install creates the Secret and injects every caBundle", func(t *testing.T) {
		f := newFixture(t, "c1")
		c := f.controller(f.options())
		err := c.ReadyCheck(nil)
		require.Error(t, err, "ready before Bootstrap")
		start := time.Now()
		f.bootstrap(c)

		s := f.mustSecret()
		assert.Equal(t, corev1.SecretTypeTLS, s.Type, "Secret type %q, want %q", s.Type, corev1.SecretTypeTLS)
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		assert.True(t, slices.Equal(keys, []string{"ca.crt", "tls.crt", "tls.key"}), "Secret keys %v, want ca.crt, tls.crt, tls.key", keys)
		leaf, ca := leafOf(t, s), caOf(t, s)
		within(t, "CA NotAfter", ca.NotAfter, start.Add(tenYears), 2*time.Minute)
		within(t, "server NotAfter", leaf.NotAfter, start.Add(tenYears), 2*time.Minute)
		assert.Contains(t, leaf.DNSNames, f.host(), "SANs %v lack %s", leaf.DNSNames, f.host())
		must(t, f.bundlesEqual(s.Data[keyCACert]))
		must(t, f.filesMatch(s))
		must(t, c.ReadyCheck(nil))

		addr := tlsServer(t, c)
		require.NoError(t, servesCertificate(addr, f.host(), s.Data[keyCACert], leaf), "the Secret's certificate")
		eventually(t, 5*time.Second, "certificate expiry metric", func() error {
			if v := gaugeValue(t); v != float64(leaf.NotAfter.Unix()) {
				return fmt.Errorf("metric %v, want %d", v, leaf.NotAfter.Unix())
			}
			return nil
		})
	})

	t.Run("C2 restart reuses a valid Secret", func(t *testing.T) {
		f := newFixture(t, "c2")
		f.bootstrap(f.controller(f.options()))
		before := f.mustSecret()

		opts := f.options()
		opts.CertDir = filepath.Join(t.TempDir(), "after-restart")
		f.certDir = opts.CertDir
		f.bootstrap(f.controller(opts))
		after := f.mustSecret()
		assert.False(t, leafOf(t, after).SerialNumber.Cmp(leafOf(t, before).SerialNumber) != 0 || caOf(t, after).SerialNumber.Cmp(caOf(t, before).SerialNumber) != 0, "restart regenerated the certificate")
		assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "restart rewrote the Secret (resourceVersion %s -> %s)", before.ResourceVersion, after.ResourceVersion)
		must(t, f.filesMatch(after))
	})

	t.Run("C2 two replicas starting together agree on one certificate", func(t *testing.T) {
		f := newFixture(t, "c2-race")
		var dirs []string
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range errs {
			opts := f.options()
			opts.CertDir = filepath.Join(t.TempDir(), fmt.Sprintf("replica-%d", i))
			dirs = append(dirs, opts.CertDir)
			c := f.controller(opts)
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				errs[i] = c.Bootstrap(ctx)
			})
		}
		wg.Wait()
		must(t, errors.Join(errs...))
		s := f.mustSecret()
		for _, d := range dirs {
			f.certDir = d
			must(t, f.filesMatch(s))
		}
		must(t, f.bundlesEqual(s.Data[keyCACert]))
		var created int
		for _, l := range f.logs.all() {
			if strings.Contains(l, "created Secret") {
				created++
			}
		}
		assert.Equal(t, 1, created, "%d replicas created the Secret, want exactly 1", created)
	})

	t.Run("C3 Secret deleted then restart issues a new certificate", func(t *testing.T) {
		f := newFixture(t, "c3")
		f.bootstrap(f.controller(f.options()))
		old := f.mustSecret()
		must(t, f.env.Client.Delete(context.Background(), old))

		f.bootstrap(f.controller(f.options()))
		s := f.mustSecret()
		assert.False(t, leafOf(t, s).SerialNumber.Cmp(leafOf(t, old).SerialNumber) == 0 || caOf(t, s).Equal(caOf(t, old)), "certificate or CA not renewed")
		must(t, f.bundlesEqual(s.Data[keyCACert]))
		must(t, f.filesMatch(s))
	})

	t.Run("T11 Secret deleted while running is regenerated", func(t *testing.T) {
		f := newFixture(t, "t11")
		c := f.controller(f.options())
		f.bootstrap(c)
		start(t, c)
		addr := tlsServer(t, c)
		old := f.mustSecret()
		must(t, f.env.Client.Delete(context.Background(), old))

		var s *corev1.Secret
		eventually(t, 10*time.Second, "new Secret", func() error {
			var err error
			if s, err = f.getSecret(); err != nil {
				return err
			}
			if leafOf(t, s).SerialNumber.Cmp(leafOf(t, old).SerialNumber) == 0 {
				return errors.New("still the old certificate")
			}
			return nil
		})
		eventually(t, 10*time.Second, "files follow the new Secret", func() error { return f.filesMatch(s) })
		eventually(t, 10*time.Second, "served certificate verifies with the new CA", func() error {
			_, err := served(addr, f.host(), s.Data[keyCACert])
			return err
		})
		eventually(t, 10*time.Second, "caBundles hold only the new CA", func() error { return f.bundlesEqual(s.Data[keyCACert]) })
	})

	c4 := []struct {
		name   string
		data   func(f *fixture) map[string][]byte
		reason string
	}{
		{"C4 wrong SANs are regenerated", func(f *fixture) map[string][]byte {
			return f.generateFor(func(o *Options) { o.ServiceName = "another-service" }).secretData()
		}, "is not valid for"},
		{"C4 server certificate expiring within the look-ahead is regenerated", func(f *fixture) map[string][]byte {
			return f.generateFor(func(o *Options) { o.ServerValidity = 30 * 24 * time.Hour }).secretData()
		}, "serving certificate expires at"},
		{"C4 CA expiring within the look-ahead is regenerated", func(f *fixture) map[string][]byte {
			return leafOutlivingCA(f.t, f.options(), 30*24*time.Hour, 365*24*time.Hour)
		}, "CA certificate"},
		{"C4 unparseable Secret is regenerated", func(f *fixture) map[string][]byte {
			return map[string][]byte{keyTLSCert: []byte("garbage"), keyTLSKey: []byte("garbage"), keyCACert: []byte("garbage")}
		}, "not a usable key pair"},
	}
	for i, tc := range c4 {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fmt.Sprintf("c4-%d", i))
			old := tc.data(f)
			f.createSecret(old)
			f.bootstrap(f.controller(f.options()))
			s := f.mustSecret()
			require.NotEqual(t, string(old[keyTLSCert]), string(s.Data[keyTLSCert]), "Secret kept")
			opts := f.options()
			opts.setDefaults()
			_, err := loadBundle(s.Data, &opts, time.Now())
			require.NoError(t, err, "regenerated Secret is not valid")
			must(t, f.filesMatch(s))
			_, err = f.logs.line("cert-controller:", "not usable", f.ns+"/"+f.secret, tc.reason)
			require.NoError(t, err)
			assertNoKeyMaterial(t, strings.Join(f.logs.all(), "\n"), old[keyTLSKey], s.Data[keyTLSKey])
		})
	}

	t.Run("C4 rotation keeps the previous CA trusted, then trims it", func(t *testing.T) {
		f := newFixture(t, "c4-overlap")
		f.overlap = 2 * time.Second
		old := f.generateFor(func(o *Options) { o.ServerValidity = 30 * 24 * time.Hour })
		f.createSecret(old.secretData())
		c := f.controller(f.options())
		f.bootstrap(c)
		s := f.mustSecret()
		// Until every replica serves the new certificate, requests verified with either CA work.
		must(t, f.bundlesEqual(append(append([]byte{}, s.Data[keyCACert]...), old.caPEM...)))
		start(t, c)
		eventually(t, 10*time.Second, "caBundles trimmed to the new CA", func() error { return f.bundlesEqual(s.Data[keyCACert]) })
	})

	t.Run("C5 CA replaced at runtime: files, served certificate and caBundles follow", func(t *testing.T) {
		f := newFixture(t, "c5")
		// Only the Secret watch can notice the change within the test's timeout.
		f.checkInterval = time.Hour
		c := f.controller(f.options())
		f.bootstrap(c)
		start(t, c)
		addr := tlsServer(t, c)
		old := f.mustSecret()

		replacement := f.generateFor(nil)
		f.replaceSecret(replacement.secretData())

		eventually(t, 10*time.Second, "files follow the replaced Secret", func() error { return f.filesMatch(f.mustSecret()) })
		eventually(t, 10*time.Second, "served certificate is the replacement", func() error {
			return servesCertificate(addr, f.host(), replacement.caPEM, replacement.leaf)
		})
		eventually(t, 10*time.Second, "caBundles trust the replacement CA (and, for the overlap, the old one)", func() error {
			return f.bundlesEqual(append(append([]byte{}, replacement.caPEM...), old.Data[keyCACert]...))
		})
		s := f.mustSecret()
		assert.Equal(t, string(replacement.certPEM), string(s.Data[keyTLSCert]), "the operator overwrote a valid replacement certificate")
	})

	t.Run("a rejected Secret's CA is never trusted, not even for the overlap", func(t *testing.T) {
		f := newFixture(t, "rejected-ca")
		f.checkInterval = time.Hour // the Secret watch reacts; the overlap lasts one interval
		c := f.controller(f.options())
		f.bootstrap(c)
		start(t, c)
		servedCA := f.mustSecret().Data[keyCACert]

		// Written by hand, and wrong: no replica may serve it, so nothing may trust its CA.
		rejected := f.generateFor(func(o *Options) { o.ServiceName = "another-service" })
		trusted := watchBundlesFor(t, f, rejected)
		f.replaceSecret(rejected.secretData())

		var regenerated []byte
		eventually(t, 10*time.Second, "the operator to replace the rejected Secret", func() error {
			ca := f.mustSecret().Data[keyCACert]
			if string(ca) == string(rejected.caPEM) || string(ca) == string(servedCA) {
				return errors.New("not regenerated yet")
			}
			regenerated = ca
			return nil
		})
		eventually(t, 10*time.Second, "caBundles to hold the new CA and, for the overlap, the CA served before (only)", func() error {
			return f.bundlesEqual(append(append([]byte{}, regenerated...), servedCA...))
		})
		time.Sleep(300 * time.Millisecond)
		places := trusted()
		assert.Empty(t, places, "the rejected Secret's CA was trusted in %s", strings.Join(places, ", "))
	})

	t.Run("T3 emptied, foreign or recreated caBundles are re-injected within CheckInterval", func(t *testing.T) {
		f := newFixture(t, "t3")
		c := f.controller(f.options())
		f.bootstrap(c)
		start(t, c)
		s := f.mustSecret()
		ctx := context.Background()
		foreign := f.generateFor(nil).caPEM

		began := time.Now()
		updateRetrying(t, f.env.Client, client.ObjectKey{Name: f.vwc}, func(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) {
			vwc.Webhooks[0].ClientConfig.CABundle = nil
		})
		updateRetrying(t, f.env.Client, client.ObjectKey{Name: f.mwc}, func(mwc *admissionregistrationv1.MutatingWebhookConfiguration) {
			mwc.Webhooks[1].ClientConfig.CABundle = foreign
		})
		updateRetrying(t, f.env.Client, client.ObjectKey{Name: dgdrCRD}, func(crd *apiextensionsv1.CustomResourceDefinition) {
			crd.Spec.Conversion.Webhook.ClientConfig.CABundle = nil
		})
		eventually(t, 10*f.checkInterval, "caBundles re-injected", func() error { return f.bundlesEqual(s.Data[keyCACert]) })
		t.Logf("re-injected %s after the caBundles were broken (CheckInterval %s)", time.Since(began).Round(time.Millisecond), f.checkInterval)

		// helm upgrade recreating the configuration without a caBundle; the deletion in
		// between is logged, not fatal.
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		must(t, f.env.Client.Get(ctx, client.ObjectKey{Name: f.vwc}, &vwc))
		must(t, f.env.Client.Delete(ctx, &vwc))
		eventually(t, 10*f.checkInterval, "missing configuration logged", func() error {
			_, err := f.logs.line("cert-controller:", "not found", "ValidatingWebhookConfiguration/"+f.vwc)
			return err
		})
		vwc.ObjectMeta = metav1.ObjectMeta{Name: f.vwc}
		for i := range vwc.Webhooks {
			vwc.Webhooks[i].ClientConfig.CABundle = nil
		}
		must(t, f.env.Client.Create(ctx, &vwc))
		eventually(t, 10*f.checkInterval, "recreated configuration re-injected", func() error { return f.bundlesEqual(s.Data[keyCACert]) })
	})

	t.Run("T10 missing RBAC is logged by the cert-controller and recovers once granted", func(t *testing.T) {
		f := newFixture(t, "t10")
		f.checkInterval = time.Hour // recovery must come from the retries, not the periodic check
		f.retries = 300 * time.Millisecond
		ctx := context.Background()
		const userName = "t10-operator"
		user, err := f.env.Environment.AddUser(envtest.User{Name: userName}, nil)
		must(t, err)
		secretRef := f.ns + "/" + f.secret

		// No permissions: Bootstrap keeps retrying and, when given up on, says why.
		shortCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = f.controllerAs(f.options(), user.Config()).Bootstrap(shortCtx)
		cancel()
		require.ErrorContains(t, err, "getting Secret "+secretRef, "Bootstrap without RBAC: want a forbidden error naming Secret %s", secretRef)
		require.True(t, apierrors.IsForbidden(err), "Bootstrap without RBAC returned %v, want a forbidden error naming Secret %s", err, secretRef)
		_, err = f.logs.line("cert-controller:", "forbidden", "getting Secret "+secretRef)
		require.NoError(t, err)

		c := f.controllerAs(f.options(), user.Config())
		bootCtx, stopBoot := context.WithCancel(ctx)
		defer stopBoot()
		booted := make(chan error, 1)
		go func() { booted <- c.Bootstrap(bootCtx) }()

		// Secrets readable and writable by name, but not creatable: "Secret not created".
		secretRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{f.secret}, Verbs: []string{"get", "list", "watch", "update", "patch"}}}
		f.grant(userName, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cert-controller-secret"}, Rules: secretRules})
		eventually(t, 10*time.Second, "create denial logged", func() error {
			_, err := f.logs.line("cert-controller:", "forbidden", "creating Secret "+secretRef)
			return err
		})
		_, err = f.getSecret()
		require.True(t, apierrors.IsNotFound(err), "Secret exists without create permission (err=%v)", err)

		injections := []string{"getting ValidatingWebhookConfiguration " + f.vwc, "getting MutatingWebhookConfiguration " + f.mwc, "getting CustomResourceDefinition " + dgdrCRD}
		deniedBeforeServing := map[string]int{}
		for _, obj := range injections {
			deniedBeforeServing[obj] = f.logs.count("cert-controller:", "forbidden", obj)
		}
		f.grant(userName, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cert-controller-secret-create"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}}}})
		select {
		case err := <-booted:
			must(t, err)
		case <-time.After(15 * time.Second):
			require.Fail(t, "Bootstrap did not recover after RBAC for the Secret was granted")
		}
		s := f.mustSecret()
		must(t, f.filesMatch(s))
		// Serving goes ahead; the caBundles can't be injected yet, and the attempt that served
		// says so: "caBundle not injected".
		for _, obj := range injections {
			require.Greater(t, f.logs.count("cert-controller:", "forbidden", obj), deniedBeforeServing[obj],
				"the Bootstrap attempt that served logged no forbidden %q", obj)
		}
		err = f.bundlesEqual(s.Data[keyCACert])
		require.Error(t, err, "caBundles injected without permission")

		// A pass of Start must fail before the grant: the recovery below then comes from the
		// retry back-off after a failed pass (the periodic check is an hour away).
		denied := "getting ValidatingWebhookConfiguration " + f.vwc
		deniedBefore := f.logs.count("cert-controller:", "forbidden", denied)
		start(t, c)
		eventually(t, 10*time.Second, "a pass of Start denied by RBAC", func() error {
			if n := f.logs.count("cert-controller:", "forbidden", denied); n <= deniedBefore {
				return fmt.Errorf("%d log lines say %q is forbidden, as many as before Start", n, denied)
			}
			return nil
		})
		f.grant(userName, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cert-controller-" + f.ns},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, ResourceNames: []string{f.vwc, f.mwc}, Verbs: []string{"get", "update", "patch"}},
				{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{dgdrCRD}, Verbs: []string{"get", "update", "patch"}},
			}})
		eventually(t, 10*time.Second, "caBundles injected after RBAC restored", func() error { return f.bundlesEqual(s.Data[keyCACert]) })

		// The Secret watch works with name-restricted RBAC (the periodic check is an hour away).
		replacement := f.generateFor(nil)
		f.replaceSecret(replacement.secretData())
		eventually(t, 10*time.Second, "files follow the replaced Secret under restricted RBAC", func() error { return f.filesMatch(f.mustSecret()) })
	})
}

// watchBundlesFor samples every caBundle until the test ends (or the returned function is
// called) and returns the places that ever held b's CA.
func watchBundlesFor(t *testing.T, f *fixture, b *servingBundle) func() []string {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if bundles, err := f.caBundles(); err == nil {
				for place, bundle := range bundles {
					if bundleHolds(bundle, b.ca) {
						mu.Lock()
						seen[place] = true
						mu.Unlock()
					}
				}
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { close(done); <-stopped }) }
	t.Cleanup(stop)
	return func() []string {
		stop()
		mu.Lock()
		defer mu.Unlock()
		out := make([]string, 0, len(seen))
		for p := range seen {
			out = append(out, p)
		}
		slices.Sort(out)
		return out
	}
}

// grant binds role (a Role or ClusterRole) to user and removes both when the test ends.
func (f *fixture) grant(user string, role client.Object) {
	f.t.Helper()
	ctx := context.Background()
	must(f.t, f.env.Client.Create(ctx, role))
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	var binding client.Object
	switch r := role.(type) {
	case *rbacv1.Role:
		binding = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Name}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name}}
	case *rbacv1.ClusterRole:
		binding = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: r.Name}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.Name}}
	}
	must(f.t, f.env.Client.Create(ctx, binding))
	f.t.Cleanup(func() {
		_ = f.env.Client.Delete(context.Background(), binding)
		_ = f.env.Client.Delete(context.Background(), role)
	})
}

// A CRD whose conversion someone edited away (removed, or set to None with the webhook stanza
// left behind) has no caBundle to inject: setCABundle says so (-1, which inject reports once)
// and writes nothing. No e2e suite edits the CRD, so this is the level that sees it.
func TestSetCABundleLeavesACRDWithoutConversionWebhookAlone(t *testing.T) {
	leftover := func() *apiextensionsv1.WebhookConversion {
		return &apiextensionsv1.WebhookConversion{ClientConfig: &apiextensionsv1.WebhookClientConfig{}}
	}
	for name, conv := range map[string]*apiextensionsv1.CustomResourceConversion{
		"no conversion":                  nil,
		"strategy None":                  {Strategy: apiextensionsv1.NoneConverter},
		"strategy None, webhook left in": {Strategy: apiextensionsv1.NoneConverter, Webhook: leftover()},
		"strategy Webhook, no webhook":   {Strategy: apiextensionsv1.WebhookConverter},
	} {
		crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{Conversion: conv}}
		assert.Equal(t, -1, setCABundle(crd, []byte("ca")), name)
		if conv != nil && conv.Webhook != nil {
			assert.Empty(t, conv.Webhook.ClientConfig.CABundle, "%s: nothing written", name)
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: leftover()}}}
	assert.Equal(t, 1, setCABundle(crd, []byte("ca")))
	assert.Equal(t, []byte("ca"), crd.Spec.Conversion.Webhook.ClientConfig.CABundle)
	assert.Equal(t, 0, setCABundle(crd, []byte("ca")), "the same bundle again changes nothing")
}
