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
)

func testOptions() Options {
	o := Options{Mode: ModeAutomatic, Namespace: "dynamo-system", SecretName: "webhook-server-cert", ServiceName: "webhook-service", CertDir: "/unused"} //nolint:gosec // G101: the name of a Kubernetes Secret, not a credential
	o.setDefaults()
	return o
}

func mustGenerate(t *testing.T, o Options) *servingBundle {
	t.Helper()
	b, err := generateBundle(&o, time.Now())
	if err != nil {
		t.Fatalf("generating bundle: %v", err)
	}
	return b
}

func within(t *testing.T, what string, got, want time.Time, tolerance time.Duration) {
	t.Helper()
	if d := got.Sub(want); d > tolerance || d < -tolerance {
		t.Errorf("%s = %s, want %s ± %s", what, got.UTC(), want.UTC(), tolerance)
	}
}

func TestGenerateBundle(t *testing.T) {
	o := testOptions()
	now := time.Now()
	b := mustGenerate(t, o)

	t.Run("CA is a self-signed root with defaults of 10 years", func(t *testing.T) {
		ca := b.ca
		if !ca.IsCA || !ca.BasicConstraintsValid || !ca.MaxPathLenZero {
			t.Errorf("CA basic constraints: IsCA=%v valid=%v maxPathLenZero=%v", ca.IsCA, ca.BasicConstraintsValid, ca.MaxPathLenZero)
		}
		if ca.KeyUsage&x509.KeyUsageCertSign == 0 {
			t.Errorf("CA key usage %b lacks certSign", ca.KeyUsage)
		}
		if err := ca.CheckSignatureFrom(ca); err != nil {
			t.Errorf("CA is not self-signed: %v", err)
		}
		within(t, "CA NotAfter", ca.NotAfter, now.Add(10*365*24*time.Hour), time.Minute)
	})

	t.Run("server certificate is for the Service, serverAuth, 10 years", func(t *testing.T) {
		leaf := b.leaf
		want := []string{"webhook-service", "webhook-service.dynamo-system", "webhook-service.dynamo-system.svc", "webhook-service.dynamo-system.svc.cluster.local"}
		if !slices.Equal(leaf.DNSNames, want) {
			t.Errorf("SANs = %v, want %v", leaf.DNSNames, want)
		}
		if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
			t.Errorf("extended key usage = %v, want [serverAuth]", leaf.ExtKeyUsage)
		}
		if leaf.IsCA {
			t.Error("server certificate is a CA")
		}
		within(t, "server NotAfter", leaf.NotAfter, now.Add(10*365*24*time.Hour), time.Minute)
		if leaf.NotBefore.After(now) {
			t.Errorf("server NotBefore %s is in the future", leaf.NotBefore)
		}
		pool := x509.NewCertPool()
		pool.AddCert(b.ca)
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "webhook-service.dynamo-system.svc", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("server certificate does not verify against its CA: %v", err)
		}
	})

	t.Run("keys are ECDSA P-256 and PEM encoded as the Secret expects", func(t *testing.T) {
		pair, err := tls.X509KeyPair(b.certPEM, b.keyPEM)
		if err != nil {
			t.Fatalf("tls.crt/tls.key do not load: %v", err)
		}
		k, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok || k.Curve != elliptic.P256() {
			t.Errorf("serving key is %T, want ECDSA P-256", pair.PrivateKey)
		}
		if blk, _ := pem.Decode(b.caPEM); blk == nil || blk.Type != "CERTIFICATE" {
			t.Errorf("ca.crt is not a PEM certificate")
		}
	})

	t.Run("fresh bundle is valid and serials are unique", func(t *testing.T) {
		if _, err := loadBundle(b.secretData(), &o, time.Now()); err != nil {
			t.Errorf("generated bundle rejected: %v", err)
		}
		other := mustGenerate(t, o)
		if other.leaf.SerialNumber.Cmp(b.leaf.SerialNumber) == 0 || other.ca.SerialNumber.Cmp(b.ca.SerialNumber) == 0 {
			t.Error("two generations share a serial number")
		}
	})

	t.Run("server validity never exceeds the CA's", func(t *testing.T) {
		o := testOptions()
		o.CAValidity, o.ServerValidity = 48*time.Hour, 96*time.Hour
		b := mustGenerate(t, o)
		if !b.leaf.NotAfter.Equal(b.ca.NotAfter) {
			t.Errorf("server NotAfter %s, CA NotAfter %s", b.leaf.NotAfter, b.ca.NotAfter)
		}
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
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("reason %q does not contain %q", err, tc.want)
			}
			assertNoKeyMaterial(t, err.Error(), good.keyPEM, other.keyPEM)
		})
	}

	t.Run("expiring beyond the look-ahead is kept", func(t *testing.T) {
		o := testOptions()
		o.LookAhead = 29 * 24 * time.Hour
		if _, err := loadBundle(expiring.secretData(), &o, time.Now()); err != nil {
			t.Errorf("rejected: %v", err)
		}
	})
}

// leafOutlivingCA signs a serving certificate valid for serverValidity with a CA valid for
// only caValidity.
func leafOutlivingCA(t *testing.T, o Options, caValidity, serverValidity time.Duration) map[string][]byte {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "short-lived-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caValidity), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: o.dnsNames(),
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(serverValidity),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
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
			if strings.Contains(s, line) {
				t.Errorf("text contains private key material: %q", s)
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
	if err := o.validate(); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	o.LookAhead = o.ServerValidity
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "look-ahead") {
		t.Errorf("look-ahead as long as the validity accepted (err=%v)", err)
	}
	ext := Options{Mode: ModeExternal, CertDir: "/x"}
	ext.setDefaults()
	if err := ext.validate(); err != nil {
		t.Errorf("external mode needs no Secret or Service names: %v", err)
	}
	empty := testOptions()
	empty.ConversionCRDs = []string{""}
	empty.setDefaults()
	if len(empty.ConversionCRDs) != 0 {
		t.Errorf("an empty --conversion-crd kept as a name: %q", empty.ConversionCRDs)
	}
	if _, err := ParseMode("manual"); err == nil {
		t.Error(`mode "manual" accepted`)
	}
}

func TestStillValidCAs(t *testing.T) {
	o := testOptions()
	a, b := mustGenerate(t, o), mustGenerate(t, o)
	both := append(append([]byte{}, a.caPEM...), b.caPEM...)

	if got := stillValidCAs(append(append([]byte{}, both...), a.caPEM...), b.caPEM, time.Now()); string(got) != string(a.caPEM) {
		t.Errorf("want only CA a once (b is current), got %d bytes", len(got))
	}
	if got := stillValidCAs(a.caPEM, b.caPEM, a.ca.NotAfter.Add(time.Second)); len(got) != 0 {
		t.Error("expired CA kept trusted")
	}
	if got := stillValidCAs(a.certPEM, b.caPEM, time.Now()); len(got) != 0 {
		t.Error("a leaf certificate was taken for a CA")
	}
	if got := stillValidCAs([]byte("garbage"), b.caPEM, time.Now()); len(got) != 0 {
		t.Error("garbage yielded a CA")
	}
}
