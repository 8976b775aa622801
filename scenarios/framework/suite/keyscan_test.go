package suite

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScanForPrivateKeysFindsEveryPEMKeyKind(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o750))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	}
	write("artifacts/cluster/pods/op.log",
		"{\"msg\":\"loaded\"}\n{\"msg\":\"secret\",\"data\":\"-----BEGIN EC PRIVATE KEY-----\\nMHcC\"}\n")
	write("artifacts/C3/secrets.txt", "tls.crt: 1200 bytes\n-----BEGIN CERTIFICATE-----\n")
	write("junit.xml", "<x>-----BEGIN PRIVATE KEY-----</x>\n")
	write("long.log", strings.Repeat("x", 1<<20)+"\n-----BEGIN RSA PRIVATE KEY-----\n")
	write("artifacts/T11/secret.json", `{"data":{"tls.key":"`+base64.StdEncoding.EncodeToString(pemBlock("RSA PRIVATE KEY"))+`"}}`+"\n")

	found, err := scanForPrivateKeys(dir)
	require.NoError(t, err)
	var got []string
	for _, f := range found {
		rel, err := filepath.Rel(dir, f.path)
		require.NoError(t, err)
		got = append(got, rel+":"+strings.TrimPrefix(f.String(), f.path+":"))
	}
	assert.ElementsMatch(t, []string{
		"artifacts/cluster/pods/op.log:2 (PEM private-key header)", "junit.xml:1 (PEM private-key header)",
		"long.log:2 (PEM private-key header)", "artifacts/T11/secret.json:1 (base64 PEM private-key header)",
	}, got,
		"a certificate is not key material; every private-key header is, wherever it is")
}

func TestScanForPrivateKeysOfNothingCollected(t *testing.T) {
	found, err := scanForPrivateKeys(filepath.Join(t.TempDir(), "never-written"))
	require.NoError(t, err, "a suite whose setup failed before writing anything collected no key")
	assert.Empty(t, found)
}

func TestKeyScanVerdict(t *testing.T) {
	assert.Empty(t, keyScanVerdict("out", nil, nil))
	assert.Contains(t, keyScanVerdict("out", nil, os.ErrPermission), "scanning out for private keys: permission denied")

	var many []keyFinding
	for i := 1; i <= 12; i++ {
		many = append(many, keyFinding{path: "op.log", line: i, form: "PEM private-key header"})
	}
	msg := keyScanVerdict("out", many, nil)
	assert.Contains(t, msg, "private key material in what the suite collected (lines with a PEM private-key header, plain, base64 or hex-dumped: 12")
	assert.Contains(t, msg, "op.log:1 (PEM private-key header), op.log:2 (PEM private-key header)")
	assert.Contains(t, msg, "op.log:10 (PEM private-key header), … 2 more")
	assert.NotContains(t, msg, "op.log:11")
}

// pemBlock is a PEM block of kind with some bytes: S1 judges the header, not what follows it.
func pemBlock(kind string) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: []byte("0123456789abcdef0123456789abcdef")})
}

// jsonString is s as a JSON string, the way a log encoder quotes a field.
func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

func TestKeyMaterialFindsBase64KeysAtEveryAlignment(t *testing.T) {
	hit := map[string]int{} // base64 form → leads it was found at
	for lead := range 3 {
		// The header alone: the footer ends the same way, at an alignment of its own.
		data := strings.Repeat("x", lead) + "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB"
		line := []byte(`{"msg":"read","data":{"tls.key":"` + base64.StdEncoding.EncodeToString([]byte(data)) + `"}}`)
		assert.Equal(t, "base64 PEM private-key header", keyMaterial(line), "%d bytes before the key", lead)
		for _, f := range base64KeyHeaders {
			if strings.Contains(string(line), f) {
				hit[f]++
			}
		}
	}
	assert.Len(t, hit, 3, "each alignment is found by its own form: %v", hit)
	for f, n := range hit {
		assert.Equal(t, 1, n, "form %s matched more than one alignment", f)
	}
}

func TestKeyMaterialFindsEveryKindInALoggedSecret(t *testing.T) {
	for _, kind := range []string{"PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "OPENSSH PRIVATE KEY"} {
		// A Secret's data as Go marshals it (a logged object, a request body): []byte → base64.
		secret, err := json.Marshal(map[string]any{"kind": "Secret", "data": map[string][]byte{"tls.key": pemBlock(kind)}})
		require.NoError(t, err)
		assert.Equal(t, "base64 PEM private-key header", keyMaterial(secret), kind)
		// The same Secret as a string field of a JSON log line (client-go's "body"), inside a
		// log line a container runtime wrapped in JSON again.
		nested := jsonString(t, `{"msg":"Request Body","body":`+jsonString(t, string(secret))+`}`)
		assert.Equal(t, "base64 PEM private-key header", keyMaterial([]byte(nested)), "%s, JSON-escaped twice", kind)
		// The PEM text itself, escaped the same way.
		assert.Equal(t, "PEM private-key header", keyMaterial([]byte(jsonString(t, jsonString(t, string(pemBlock(kind)))))), kind)
	}
}

func TestKeyMaterialFindsKeysInClientGosHexDumps(t *testing.T) {
	// client-go logs a protobuf body as hex.Dump: the PEM header is cut across rows.
	body := append([]byte("k8s\x00\n\x0c\n\x02v1\x12\x06Secret\x12\x8a\x03\n\x07tls.key\x12"), pemBlock("RSA PRIVATE KEY")...)
	line := []byte(`{"level":"debug","logger":"klog","msg":"Request Body","body":` + jsonString(t, hex.Dump(body)) + `}`)
	require.NotRegexp(t, privateKeyBlock, string(line), "the header must be split across rows for this test to mean anything")
	assert.Equal(t, "PEM private-key header in a hex dump", keyMaterial(line))

	b64 := []byte(base64.StdEncoding.EncodeToString(pemBlock("PRIVATE KEY")))
	line = []byte(`{"msg":"Response Body","body":` + jsonString(t, hex.Dump(append([]byte("k8s\x00\n\x04"), b64...))) + `}`)
	assert.Equal(t, "base64 PEM private-key header in a hex dump", keyMaterial(line))
}

func TestKeyMaterialLeavesCertificatesAlone(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dynamo-webhook-service.dynamo-system.svc"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"dynamo-webhook-service.dynamo-system.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})

	for name, public := range map[string][]byte{"certificate": certPEM, "public key": pubPEM} {
		assert.Empty(t, keyMaterial(public), "%s, PEM", name)
		assert.Empty(t, keyMaterial([]byte(jsonString(t, string(public)))), "%s, in a JSON string", name)
		for lead := range 3 {
			data := append([]byte(strings.Repeat("x", lead)), public...)
			assert.Empty(t, keyMaterial([]byte(base64.StdEncoding.EncodeToString(data))), "%s, base64 after %d bytes", name, lead)
		}
		assert.Empty(t, keyMaterial([]byte(jsonString(t, hex.Dump(public)))), "%s, hex-dumped", name)
	}
	assert.Empty(t, keyMaterial([]byte(base64.StdEncoding.EncodeToString(der))), "a certificate's DER in base64")
}
