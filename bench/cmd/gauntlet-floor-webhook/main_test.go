package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
)

// review is an AdmissionReview request as the API server sends it, object included.
func review(uid, name string) string {
	return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"` + uid + `","name":"` + name +
		`","namespace":"bench","operation":"CREATE","object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment",` +
		`"metadata":{"name":"` + name + `"},"spec":{"services":{"frontend":{"replicas":1}}}}}}`
}

func post(t *testing.T, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	admitter{}.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	return w
}

// answer is the AdmissionReview a 200 OK answer carries.
func answer(t *testing.T, w *httptest.ResponseRecorder) reviewResponse {
	t.Helper()
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var got reviewResponse
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	return got
}

func TestAdmitAllowsWithTheRequestsUIDAndNoWarning(t *testing.T) {
	w := post(t, "/validate", review("0b9f2c1e-uid", "bench-42"))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.JSONEq(t, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"0b9f2c1e-uid","allowed":true}}`, w.Body.String())
}

func TestAdmitWarnsOnlyForFloorProbes(t *testing.T) {
	for name, want := range map[string][]string{
		"floor-probe-x7k2q": {"gauntlet floor webhook"},
		"bench-floor-probe": nil,
		"floor-probe":       nil,
	} {
		w := post(t, "/mutate", review("u-1", name))
		got := answer(t, w)
		assert.True(t, got.Response.Allowed, name)
		assert.Equal(t, "u-1", got.Response.UID, name)
		assert.Equal(t, want, got.Response.Warnings, name)
	}
}

func TestAdmitAnswersThePatchingPathWithThePatch(t *testing.T) {
	patch := `[{"op":"add","path":"/metadata/annotations","value":{"nvidia.com/dynamo-operator-origin-version":"floor"}}]`
	a := admitter{patch: []byte(patch)}
	for path, patched := range map[string]bool{patchingPath: true, "/mutate": false, "/validate": false} {
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(review("u-3", "bench-7"))))
		got := answer(t, w)
		assert.True(t, got.Response.Allowed, path)
		if !patched {
			assert.Empty(t, got.Response.PatchType, path)
			assert.Empty(t, got.Response.Patch, path)
			continue
		}
		assert.Equal(t, "JSONPatch", got.Response.PatchType, path)
		assert.JSONEq(t, patch, string(got.Response.Patch), path)
	}
	w := post(t, patchingPath, review("u-4", "bench-8"))
	assert.NotContains(t, w.Body.String(), "patch", "without --patch the patching path answers as any other")
}

func TestRunRefusesAPatchThatIsNotOne(t *testing.T) {
	for patch, want := range map[string]string{
		`{"op":"add"}`:    "is not a JSON patch (an array of operations)",
		`[{"op":"add"}]`:  "operation 1 has no op or no path",
		`[{"path":"/a"}]`: "operation 1 has no op or no path",
		`not json`:        "is not a JSON patch",
	} {
		err := run(t.Context(), []string{"--patch", patch, "--cert-dir", t.TempDir()}, io.Discard)
		require.ErrorContains(t, err, want, patch)
	}
}

func TestAdmitRefusesABodyWithoutAUID(t *testing.T) {
	for _, body := range []string{`{"request":{"name":"x"}}`, `{"kind":"AdmissionReview"}`} {
		w := post(t, "/validate", body)
		assert.Equal(t, http.StatusBadRequest, w.Code, body)
		assert.Contains(t, w.Body.String(), "no request.uid", body)
	}
}

func TestAdmitRefusesGarbage(t *testing.T) {
	w := post(t, "/validate", "<html>not json")
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), "not a JSON AdmissionReview")
}

func TestAdmitRefusesAnOversizedBody(t *testing.T) {
	w := post(t, "/validate", `{"request":{"uid":"u","name":"`+strings.Repeat("x", maxRequestBytes)+`"}}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
}

func TestAdmitRefusesGET(t *testing.T) {
	w := httptest.NewRecorder()
	admitter{}.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/validate", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Equal(t, http.MethodPost, w.Header().Get("Allow"))
}

func TestHealthz(t *testing.T) {
	w := httptest.NewRecorder()
	healthz(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "ok", w.Body.String())

	w = httptest.NewRecorder()
	healthz(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	assert.Equal(t, http.StatusNotFound, w.Code)
}

// TestServeSpeaksHTTP1OverTLSAndStopsWhenCancelled runs the servers as the pod
// does: a client that offers HTTP/2 first (as the API server's would, were the
// server to accept it) gets HTTP/1.1, the probe port answers plain HTTP, and
// cancelling the context shuts both down.
func TestServeSpeaksHTTP1OverTLSAndStopsWhenCancelled(t *testing.T) {
	ca, err := pki.NewCertificateAuthority("floor test CA", time.Hour)
	require.NoError(t, err)
	sc, err := ca.Issue(pki.LeafOptions{DNSNames: []string{"gauntlet-floor.gauntlet-floor.svc"}})
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(sc.CertPEM, sc.KeyPEM)
	require.NoError(t, err)
	webhookLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	probeLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, webhookLn, probeLn, &cert, nil) }()

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		ForceAttemptHTTP2: true,
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: "gauntlet-floor.gauntlet-floor.svc", NextProtos: []string{"h2", "http/1.1"}},
	}}
	resp, err := client.Post("https://"+webhookLn.Addr().String()+"/validate", "application/json", strings.NewReader(review("u-2", "floor-probe-a")))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.Equal(t, "HTTP/1.1", resp.Proto)
	assert.Equal(t, "http/1.1", resp.TLS.NegotiatedProtocol)

	resp, err = http.Get("http://" + probeLn.Addr().String() + "/healthz")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(shutdownTimeout + 5*time.Second):
		t.Fatal("serve did not return after its context was cancelled")
	}
}

// certDir writes a serving certificate for the floor's Service host, its CA and, with caKey, the
// CA's key into a new directory, as the floor's Secret is mounted.
func certDir(t *testing.T, caKey bool) (string, *pki.CertificateAuthority) {
	t.Helper()
	ca, err := pki.NewCertificateAuthority("floor test CA", time.Hour)
	require.NoError(t, err)
	sc, err := ca.Issue(pki.LeafOptions{DNSNames: []string{"gauntlet-floor.gauntlet-floor.svc"}})
	require.NoError(t, err)
	dir := t.TempDir()
	files := map[string][]byte{"tls.crt": sc.CertPEM, "tls.key": sc.KeyPEM, "ca.crt": sc.CAPEM}
	if caKey {
		files["ca.key"], err = ca.KeyPEM()
		require.NoError(t, err)
	}
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	return dir, ca
}

func TestServingCertificateForThePodsAddress(t *testing.T) {
	dir, ca := certDir(t, true)
	cert, err := servingCertificate(dir, "10.244.44.9")
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, host := range []string{"10.244.44.9", "gauntlet-floor.gauntlet-floor.svc"} {
		_, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host})
		require.NoError(t, err, "the API server calls %s and trusts the floor's CA", host)
	}

	plain, err := servingCertificate(dir, "")
	require.NoError(t, err)
	_, err = plain.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "10.244.44.9"})
	require.Error(t, err, "without --ip-san the mounted certificate, for the Service host alone")

	_, err = servingCertificate(dir, "pod-ip")
	require.ErrorContains(t, err, `--ip-san "pod-ip" is not an IP address`)
	noKey, _ := certDir(t, false)
	_, err = servingCertificate(noKey, "10.244.44.9")
	require.ErrorContains(t, err, "--ip-san needs the CA's key to issue a certificate for 10.244.44.9")
}
