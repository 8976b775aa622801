package pki

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
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// form is the form of key material KeyMaterial finds in line.
func form(line []byte) string {
	f, _ := KeyMaterial(line)
	return f
}

func TestKeyMaterialSaysWhereTheKeyStarts(t *testing.T) {
	line := []byte(`{"msg":"created","data":{"tls.key":"` + base64.StdEncoding.EncodeToString(pemBlock("EC PRIVATE KEY")) + `"}}`)
	f, at := KeyMaterial(line)
	require.Equal(t, "base64 PEM private-key header", f)
	assert.True(t, strings.HasSuffix(string(line[:at]), `"tls.key":"LS0tLS1CRUdJTiBFQyB`), "before it, only the header's start, no key: %s", line[:at])
	f, at = KeyMaterial([]byte("x -----BEGIN PRIVATE KEY-----"))
	assert.Equal(t, "PEM private-key header", f)
	assert.Equal(t, 2, at)
	f, at = KeyMaterial([]byte("nothing here"))
	assert.Empty(t, f)
	assert.Equal(t, -1, at)
}

// pemBlock is a PEM block of kind with some bytes: KeyMaterial judges the header, not what follows it.
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
		assert.Equal(t, "base64 PEM private-key header", form(line), "%d bytes before the key", lead)
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
		assert.Equal(t, "base64 PEM private-key header", form(secret), kind)
		// The same Secret as a string field of a JSON log line (client-go's "body"), inside a
		// log line a container runtime wrapped in JSON again.
		nested := jsonString(t, `{"msg":"Request Body","body":`+jsonString(t, string(secret))+`}`)
		assert.Equal(t, "base64 PEM private-key header", form([]byte(nested)), "%s, JSON-escaped twice", kind)
		// The PEM text itself, escaped the same way.
		assert.Equal(t, "PEM private-key header", form([]byte(jsonString(t, jsonString(t, string(pemBlock(kind)))))), kind)
	}
}

func TestKeyMaterialFindsKeysInClientGosHexDumps(t *testing.T) {
	// client-go logs a protobuf body as hex.Dump: the PEM header is cut across rows.
	body := append([]byte("k8s\x00\n\x0c\n\x02v1\x12\x06Secret\x12\x8a\x03\n\x07tls.key\x12"), pemBlock("RSA PRIVATE KEY")...)
	line := []byte(`{"level":"debug","logger":"klog","msg":"Request Body","body":` + jsonString(t, hex.Dump(body)) + `}`)
	require.NotRegexp(t, privateKeyBlock, string(line), "the header must be split across rows for this test to mean anything")
	assert.Equal(t, "PEM private-key header in a hex dump", form(line))

	b64 := []byte(base64.StdEncoding.EncodeToString(pemBlock("PRIVATE KEY")))
	line = []byte(`{"msg":"Response Body","body":` + jsonString(t, hex.Dump(append([]byte("k8s\x00\n\x04"), b64...))) + `}`)
	assert.Equal(t, "base64 PEM private-key header in a hex dump", form(line))
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
		assert.Empty(t, form(public), "%s, PEM", name)
		assert.Empty(t, form([]byte(jsonString(t, string(public)))), "%s, in a JSON string", name)
		for lead := range 3 {
			data := append([]byte(strings.Repeat("x", lead)), public...)
			assert.Empty(t, form([]byte(base64.StdEncoding.EncodeToString(data))), "%s, base64 after %d bytes", name, lead)
		}
		assert.Empty(t, form([]byte(jsonString(t, hex.Dump(public)))), "%s, hex-dumped", name)
	}
	assert.Empty(t, form([]byte(base64.StdEncoding.EncodeToString(der))), "a certificate's DER in base64")
}
