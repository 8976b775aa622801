package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testOptions() Options {
	o := Options{Mode: ModeAutomatic, Namespace: "dynamo-system", SecretName: "webhook-server-cert", ServiceName: "webhook-service", CertDir: "/unused"} //nolint:gosec // G101: the name of a Kubernetes Secret, not a credential
	o.setDefaults()
	return o
}

func mustGenerate(t *testing.T, o Options) *servingBundle {
	t.Helper()
	b, err := generateBundle(&o, time.Now())
	require.NoError(t, err, "generating bundle")
	return b
}

func within(t *testing.T, what string, got, want time.Time, tolerance time.Duration) {
	t.Helper()
	assert.WithinDuration(t, want, got, tolerance, "%s = %s, want %s ± %s", what, got.UTC(), want.UTC(), tolerance)
}

func TestGenerateBundle(t *testing.T) {
	o := testOptions()
	now := time.Now()
	b := mustGenerate(t, o)

	t.Run("CA is a self-signed root with defaults of 10 years", func(t *testing.T) {
		ca := b.ca
		assert.False(t, !ca.IsCA || !ca.BasicConstraintsValid || !ca.MaxPathLenZero, "CA basic constraints: IsCA=%v valid=%v maxPathLenZero=%v", ca.IsCA, ca.BasicConstraintsValid, ca.MaxPathLenZero)
		assert.NotZero(t, ca.KeyUsage&x509.KeyUsageCertSign, "CA key usage %b lacks certSign", ca.KeyUsage)
		require.NoError(t, ca.CheckSignatureFrom(ca), "CA is not self-signed")
		within(t, "CA NotAfter", ca.NotAfter, now.Add(10*365*24*time.Hour), time.Minute)
	})

	t.Run("server certificate is for the Service, serverAuth, 10 years", func(t *testing.T) {
		leaf := b.leaf
		want := []string{"webhook-service", "webhook-service.dynamo-system", "webhook-service.dynamo-system.svc", "webhook-service.dynamo-system.svc.cluster.local"}
		assert.True(t, slices.Equal(leaf.DNSNames, want), "SANs = %v, want %v", leaf.DNSNames, want)
		assert.True(t, slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}), "extended key usage = %v, want [serverAuth]", leaf.ExtKeyUsage)
		assert.False(t, leaf.IsCA, "server certificate is a CA")
		within(t, "server NotAfter", leaf.NotAfter, now.Add(10*365*24*time.Hour), time.Minute)
		assert.False(t, leaf.NotBefore.After(now), "server NotBefore %s is in the future", leaf.NotBefore)
		pool := x509.NewCertPool()
		pool.AddCert(b.ca)
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "webhook-service.dynamo-system.svc", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		require.NoError(t, err, "server certificate does not verify against its CA")
	})

	t.Run("keys are ECDSA P-256 and PEM encoded as the Secret expects", func(t *testing.T) {
		pair, err := tls.X509KeyPair(b.certPEM, b.keyPEM)
		require.NoError(t, err, "tls.crt/tls.key do not load")
		k, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		assert.False(t, !ok || k.Curve != elliptic.P256(), "serving key is %T, want ECDSA P-256", pair.PrivateKey)
		blk, _ := pem.Decode(b.caPEM)
		assert.False(t, blk == nil || blk.Type != "CERTIFICATE", "ca.crt is not a PEM certificate")
	})

	t.Run("fresh bundle is valid and serials are unique", func(t *testing.T) {
		_, err := loadBundle(b.secretData(), &o, time.Now())
		require.NoError(t, err, "generated bundle rejected")
		other := mustGenerate(t, o)
		assert.False(t, other.leaf.SerialNumber.Cmp(b.leaf.SerialNumber) == 0 || other.ca.SerialNumber.Cmp(b.ca.SerialNumber) == 0, "two generations share a serial number")
	})

	t.Run("server validity never exceeds the CA's", func(t *testing.T) {
		o := testOptions()
		o.CAValidity, o.ServerValidity = 48*time.Hour, 96*time.Hour
		b := mustGenerate(t, o)
		assert.True(t, b.leaf.NotAfter.Equal(b.ca.NotAfter), "server NotAfter %s, CA NotAfter %s", b.leaf.NotAfter, b.ca.NotAfter)
	})
}

func TestLoadBundleRejects(t *testing.T) {
	o := testOptions()
	good := mustGenerate(t, o)
	other := mustGenerate(t, o)

	otherSvc := testOptions()
	otherSvc.ServiceName = "other-service"
	wrongSANs := mustGenerate(t, otherSvc)

	shortServer := testOptions()
	shortServer.ServerValidity = 30 * 24 * time.Hour
	expiring := mustGenerate(t, shortServer)

	// generateBundle never lets a leaf outlive its CA, but a Secret written by someone else can.
	caExpiring := leafOutlivingCA(t, o, 30*24*time.Hour, 365*24*time.Hour)

	with := func(k string, v []byte) map[string][]byte {
		d := good.secretData()
		if v == nil {
			delete(d, k)
		} else {
			d[k] = v
		}
		return d
	}

	cases := []struct {
		name string
		data map[string][]byte
		now  time.Time
		want string
	}{
		{"missing tls.key", with(keyTLSKey, nil), time.Now(), "tls.key is missing"},
		{"missing ca.crt", with(keyCACert, nil), time.Now(), "ca.crt is missing"},
		{"missing tls.crt", with(keyTLSCert, nil), time.Now(), "tls.crt is missing"},
		{"garbage tls.crt", with(keyTLSCert, []byte("not a certificate")), time.Now(), "not a usable key pair"},
		{"garbage tls.key", with(keyTLSKey, []byte("-----BEGIN PRIVATE KEY-----\nZ2FyYmFnZQ==\n-----END PRIVATE KEY-----\n")), time.Now(), "not a usable key pair"},
		{"key of another certificate", with(keyTLSKey, other.keyPEM), time.Now(), "not a usable key pair"},
		{"garbage ca.crt", with(keyCACert, []byte("garbage")), time.Now(), "parsing ca.crt"},
		{"ca.crt of another CA", with(keyCACert, other.caPEM), time.Now(), "does not verify against ca.crt"},
		{"wrong SANs", wrongSANs.secretData(), time.Now(), "not valid for webhook-service.dynamo-system.svc"},
		{"server expiring within look-ahead", expiring.secretData(), time.Now(), "serving certificate expires at"},
		{"CA expiring within look-ahead", caExpiring, time.Now(), "CA certificate"},
		{"already expired", good.secretData(), time.Now().Add(11 * 365 * 24 * time.Hour), "serving certificate expires at"},
		{"not yet valid", good.secretData(), time.Now().Add(-time.Hour), "not valid before"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadBundle(tc.data, &o, tc.now)
			require.Error(t, err, "accepted")
			assert.Contains(t, err.Error(), tc.want, "reason %q does not contain %q", err, tc.want)
			assertNoKeyMaterial(t, err.Error(), good.keyPEM, other.keyPEM)
		})
	}

	t.Run("expiring beyond the look-ahead is kept", func(t *testing.T) {
		o := testOptions()
		o.LookAhead = 29 * 24 * time.Hour
		_, err := loadBundle(expiring.secretData(), &o, time.Now())
		require.NoError(t, err, "rejected")
	})
}

// leafOutlivingCA signs a serving certificate valid for serverValidity with a CA valid for
// only caValidity.
func leafOutlivingCA(t *testing.T, o Options, caValidity, serverValidity time.Duration) map[string][]byte {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "short-lived-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caValidity), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: o.dnsNames(),
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(serverValidity),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, key.Public(), caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return map[string][]byte{
		keyTLSCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyTLSKey:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		keyCACert:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}
}

// assertNoKeyMaterial fails if s contains any line of a PEM private key's body.
func assertNoKeyMaterial(t *testing.T, s string, keys ...[]byte) {
	t.Helper()
	for _, k := range keys {
		for _, line := range strings.Split(string(k), "\n") {
			if line == "" || strings.HasPrefix(line, "-----") {
				continue
			}
			if !assert.NotContains(t, s, line, "text contains private key material: %q", s) {
				return
			}
		}
	}
}

func TestBundleFormattingHidesKey(t *testing.T) {
	b := mustGenerate(t, testOptions())
	for _, verb := range []string{"%v", "%+v", "%s", "%#v"} {
		assertNoKeyMaterial(t, fmt.Sprintf(verb, b), b.keyPEM)
	}
}

func TestOptionsValidation(t *testing.T) {
	o := testOptions()
	require.NoError(t, o.validate(), "defaults rejected")
	o.LookAhead = o.ServerValidity
	err := o.validate()
	require.ErrorContains(t, err, "look-ahead", "look-ahead as long as the validity accepted")
	short := testOptions()
	short.LookAhead, short.CAPropagation, short.CheckInterval = 6*time.Second, 5*time.Second, time.Second
	require.ErrorContains(t, short.validate(), "certificate look-ahead 6s must be longer than the CA propagation 5s plus the check interval 1s",
		"a look-ahead the rotation protocol outlasts accepted: the old certificate would expire before the new one is served")
	short.LookAhead = 6*time.Second + time.Millisecond
	require.NoError(t, short.validate(), "a look-ahead just longer than propagation + check interval rejected")
	ext := Options{Mode: ModeExternal, CertDir: "/x"}
	ext.setDefaults()
	require.NoError(t, ext.validate(), "external mode needs no Secret or Service names")
	empty := testOptions()
	empty.ConversionCRDs = []string{""}
	empty.setDefaults()
	assert.Empty(t, empty.ConversionCRDs, "an empty --conversion-crd kept as a name: %q", empty.ConversionCRDs)
	_, err = ParseMode("manual")
	require.Error(t, err, `mode "manual" accepted`)
}

func TestStillValidCAs(t *testing.T) {
	o := testOptions()
	a, b := mustGenerate(t, o), mustGenerate(t, o)
	both := append(append([]byte{}, a.caPEM...), b.caPEM...)

	got := stillValidCAs(append(append([]byte{}, both...), a.caPEM...), b.caPEM, time.Now())
	assert.Equal(t, string(a.caPEM), string(got), "want only CA a once (b is current), got %d bytes", len(got))
	got = stillValidCAs(a.caPEM, b.caPEM, a.ca.NotAfter.Add(time.Second))
	assert.Empty(t, got, "expired CA kept trusted")
	got = stillValidCAs(a.certPEM, b.caPEM, time.Now())
	assert.Empty(t, got, "a leaf certificate was taken for a CA")
	got = stillValidCAs([]byte("garbage"), b.caPEM, time.Now())
	assert.Empty(t, got, "garbage yielded a CA")
}
