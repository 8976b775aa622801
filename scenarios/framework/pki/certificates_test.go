package pki_test

import (
	"crypto/x509"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServingCertificates(t *testing.T) {
	sc, err := pki.NewServingCertificate("svc.ns.svc")
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(sc.CAPEM)
	_, err = sc.Leaf.Verify(x509.VerifyOptions{DNSName: "svc.ns.svc", Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.NoError(t, err, "expected the serving certificate to verify for svc.ns.svc against its CA, saw %v", err)
	ca, err := pki.NewCertificateAuthority("t", time.Hour)
	require.NoError(t, err)
	expired, err := ca.Issue(pki.LeafOptions{DNSNames: []string{"a"}, NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	assert.True(t, expired.Leaf.NotAfter.Before(time.Now()), "expected an expired certificate, saw %s", pki.Describe(expired.Leaf))
	olm := pki.ServingSecret("ns", "s", sc, true)
	_, ok := olm.Data["tls.cert"]
	assert.False(t, !ok || olm.Data["tls.crt"] != nil || string(olm.Type) != "Opaque", "expected an Opaque Secret with OLM's tls.cert, saw type %s keys %v", olm.Type, keysOf(olm.Data))
	info := pki.Describe(sc.Leaf).String()
	assert.Contains(t, info, "svc.ns.svc", "expected a description with SANs and serial and no key, saw %s", info)
	assert.Contains(t, info, pki.SerialHex(sc.Leaf), "expected a description with SANs and serial and no key, saw %s", info)
	assert.NotContains(t, info, "PRIVATE", "expected a description with SANs and serial and no key, saw %s", info)
}

func TestCABundlesSayWhatIsMissing(t *testing.T) {
	a, _ := pki.NewServingCertificate("a")
	b, _ := pki.NewServingCertificate("b")
	bundles := pki.CABundles{"one": a.CAPEM, "two": b.CAPEM, "three": nil}
	got := bundles.Missing(a.CAPEM)
	assert.True(t, slices.Equal(got, []string{"three", "two"}), "expected places without CA a to be [three two], saw %v", got)
	desc := bundles.DescribeMissing(a.CAPEM)
	assert.Contains(t, desc, "three: empty", "expected the description to name the empty bundle and the other CA's serial, saw %q", desc)
	assert.Contains(t, desc, "two: holds", "expected the description to name the empty bundle and the other CA's serial, saw %q", desc)
	assert.Contains(t, desc, pki.SerialHex(b.CA), "expected the description to name the empty bundle and the other CA's serial, saw %q", desc)
}

func TestCABundlesSayWhereACAIsRepeated(t *testing.T) {
	a, err := pki.NewServingCertificate("a")
	require.NoError(t, err)
	b, err := pki.NewServingCertificate("b")
	require.NoError(t, err)
	twice := append(append(append([]byte{}, a.CAPEM...), b.CAPEM...), a.CAPEM...)
	bundles := pki.CABundles{"once": a.CAPEM, "twice": twice, "other": b.CAPEM, "empty": nil}
	assert.Equal(t, []string{"twice: 2 copies"}, bundles.Repeated(a.CA))
	assert.Empty(t, bundles.Repeated(b.CA))
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestVerifyServedAsTheAPIServerDoes(t *testing.T) {
	sc, err := pki.NewServingCertificate("svc.ns.svc")
	require.NoError(t, err)
	other, err := pki.NewServingCertificate("svc.ns.svc")
	require.NoError(t, err)
	chain := []*x509.Certificate{sc.Leaf}
	assert.NoError(t, pki.VerifyServed(sc.CAPEM, chain, "svc.ns.svc"))
	require.ErrorContains(t, pki.VerifyServed(other.CAPEM, chain, "svc.ns.svc"), "x509: certificate signed by unknown authority")
	require.ErrorContains(t, pki.VerifyServed(sc.CAPEM, chain, "other.ns.svc"), "x509: certificate is valid for svc.ns.svc, not other.ns.svc")
	require.EqualError(t, pki.VerifyServed(nil, chain, "svc.ns.svc"), "the caBundle is empty")
	assert.ErrorContains(t, pki.VerifyServed([]byte("not pem"), chain, "svc.ns.svc"), "the caBundle does not parse")
}

func TestLoadCertificateAuthorityIssuesWhatItsCAPEMVerifies(t *testing.T) {
	ca, err := pki.NewCertificateAuthority("floor CA", time.Hour)
	require.NoError(t, err)
	key, err := ca.KeyPEM()
	require.NoError(t, err)
	loaded, err := pki.LoadCertificateAuthority(ca.PEM, key)
	require.NoError(t, err)
	sc, err := loaded.Issue(pki.LeafOptions{IPAddresses: []net.IP{net.ParseIP("10.244.0.7")}})
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.PEM))
	_, err = sc.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "10.244.0.7"})
	require.NoError(t, err, "a leaf of the loaded CA verifies against the original CA's PEM, for its IP address")

	other, err := pki.NewCertificateAuthority("other CA", time.Hour)
	require.NoError(t, err)
	otherKey, err := other.KeyPEM()
	require.NoError(t, err)
	_, err = pki.LoadCertificateAuthority(ca.PEM, otherKey)
	require.ErrorContains(t, err, "the key is not the key of CA")
	_, err = pki.LoadCertificateAuthority(sc.CertPEM, key)
	require.ErrorContains(t, err, "is not a CA's")
	_, err = pki.LoadCertificateAuthority(ca.PEM, []byte("no key"))
	require.ErrorContains(t, err, "reading the key of CA")
}
