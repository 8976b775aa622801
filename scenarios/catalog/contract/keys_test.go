package contract

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func pemKey(t *testing.T, typ string, der []byte) []byte {
	t.Helper()
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func testKeys(t *testing.T) map[string][]byte {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ecDER, err := x509.MarshalECPrivateKey(ec)
	require.NoError(t, err)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(ec)
	require.NoError(t, err)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return map[string][]byte{
		"EC":    pemKey(t, "EC PRIVATE KEY", ecDER),
		"PKCS8": pemKey(t, "PRIVATE KEY", pkcs8),
		"RSA":   pemKey(t, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)),
	}
}

func TestPrivateKeysInFindsEveryWayAKeyIsLogged(t *testing.T) {
	for name, key := range testKeys(t) {
		escaped, err := json.Marshal(string(key))
		require.NoError(t, err)
		secret, err := json.Marshal(corev1.Secret{Data: map[string][]byte{"tls.key": key}})
		require.NoError(t, err)
		body, _ := pem.Decode(key)
		logs := map[string]string{
			"PEM as text":                        "starting\n" + string(key) + "done\n",
			"PEM JSON-escaped":                   `{"msg":"wrote files","key":` + string(escaped) + "}\n",
			"the Secret object logged":           `{"msg":"created Secret","secret":` + string(secret) + "}\n",
			"the key's DER base64, no PEM frame": "key=" + base64.StdEncoding.EncodeToString(body.Bytes) + "\n",
		}
		for how, log := range logs {
			found := privateKeysIn([]byte(log), [][]byte{key})
			if assert.Len(t, found, 1, "%s key, %s: %q", name, how, log) {
				assert.NotContains(t, found[0], base64.StdEncoding.EncodeToString(body.Bytes)[:64], "the report quotes the key")
			}
		}
	}
}

func TestPrivateKeysInNamesTheLineAndWhatComesBeforeTheKey(t *testing.T) {
	key := testKeys(t)["EC"]
	secret, err := json.Marshal(corev1.Secret{Data: map[string][]byte{"tls.key": key}})
	require.NoError(t, err)
	log := "first\nsecond\n" + `{"msg":"created Secret","secret":` + string(secret) + "}\n"
	found := privateKeysIn([]byte(log), nil)
	require.Len(t, found, 1)
	assert.True(t, strings.HasPrefix(found[0], `line 3: "{\"msg\":\"created Secret\",\"secret\":{\"metadata\":{},\"data\":{\"tls.key\":\"`), found[0])
	assert.True(t, strings.HasSuffix(found[0], "(base64 PEM private-key header)"), found[0])
}

func TestPrivateKeysInPassesCertificatesAndOrdinaryLogs(t *testing.T) {
	key := testKeys(t)["EC"]
	log := `{"msg":"created Secret with a new CA and serving certificate","secret":"ns/webhook-server-cert","certificate":"serial 1f"}` + "\n" +
		"-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUYdKqL0\n-----END CERTIFICATE-----\n" +
		base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")) + "\n" +
		"loading tls.key from /tmp/k8s-webhook-server/serving-certs\n"
	assert.Empty(t, privateKeysIn([]byte(log), [][]byte{key}))
}
