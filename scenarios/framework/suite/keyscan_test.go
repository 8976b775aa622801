package suite

import (
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// A log line longer than any buffer (Kyverno logged W10's 100 MB bodies on one line) is scanned
// in overlapping pieces: no error, and a key header across a piece's boundary is still found,
// once, on its line.
func TestScanForPrivateKeysReadsLinesLongerThanAnyBuffer(t *testing.T) {
	dir := t.TempDir()
	header := "-----BEGIN RSA PRIVATE KEY-----" //nolint:gosec // G101: a PEM header the scan must find, no key
	long := strings.Repeat("x", scanChunk-10) + header + strings.Repeat("y", 3*scanChunk)
	clean := strings.Repeat("z", 5*scanChunk)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kyverno.log"), []byte(clean+"\n"+long+"\nshort\n"+header+"\n"), 0o600))
	found, err := scanForPrivateKeys(dir)
	require.NoError(t, err)
	var lines []int
	for _, f := range found {
		lines = append(lines, f.line)
	}
	assert.Equal(t, []int{2, 4}, lines)
}
