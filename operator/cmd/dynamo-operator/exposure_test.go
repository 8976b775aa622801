package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gauntlet-dev/gauntlet/operator/internal/testcluster"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook"
)

// freeAddr is a loopback address with a port nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// exposureChecks is what anyone who reaches the operator's ports sees (issue 15, findings 1 and
// 5), against the operator the caller runs: bounded request bodies, one quiet log line per bad
// request, handshake errors in the JSON log stream, TLS 1.2 with ECDHE+AEAD suites only, and
// metrics only for authorized bearer tokens.
func exposureChecks(ctx context.Context, t *testing.T, env *testcluster.Env, metricsAddr string, logs *testcluster.LogBuffer) {
	t.Helper()
	webhookAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(webhookPortTest))
	// We look at what the server does, not whom to trust.
	insecure := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // see above
	}}

	// First, before the handshakes the cipher checks fail on purpose: handshake errors are
	// logged at info at most once per interval.
	t.Run("TLS handshake errors are entries of the JSON log stream", func(t *testing.T) {
		c, err := net.Dial("tcp", webhookAddr)
		require.NoError(t, err)
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") // plain HTTP to the TLS port
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.Copy(io.Discard, c)
		_ = c.Close()
		eventually(t, "a JSON entry for the handshake error", func() error {
			for _, e := range logEntries(t, logs) {
				if e["msg"] == "TLS handshake error" && e["logger"] == "http" && strings.HasPrefix(str(e["remote"]), "127.0.0.1:") {
					assert.Equal(t, "info", e["level"], "entry: %v", e)
					assert.Contains(t, e["error"], "HTTP request to an HTTPS server", "entry: %v", e)
					return nil
				}
			}
			return errString("no entry {msg: TLS handshake error, logger: http} yet")
		})
	})

	t.Run("malformed admission and conversion requests are info lines with the reason, no error, no stack trace", func(t *testing.T) {
		for _, r := range []struct{ path, contentType, body, reason string }{
			{"/validate-nvidia-com-v1alpha1-dynamographdeployment", "application/json", "{not json", "invalid character"},
			{"/mutate-nvidia-com-v1alpha1-dynamographdeployment", "text/plain", "{}", "text/plain"},
			{webhook.ConversionPath, "application/json", "{not json", "invalid character"},
			{webhook.ConversionPath, "application/json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"1","desiredAPIVersion":"nvidia.com/v1beta1","objects":[{"apiVersion":"nvidia.com/v9","kind":"Nope"}]}}`, "nvidia.com/v9"},
		} {
			before := len(logEntries(t, logs))
			resp, err := insecure.Post("https://"+webhookAddr+r.path, r.contentType, strings.NewReader(r.body))
			require.NoError(t, err)
			_ = resp.Body.Close()
			entries := logEntries(t, logs)[before:]
			found := false
			for _, e := range entries {
				assert.NotEqual(t, "error", e["level"], "POST %s (%s): entry: %v", r.path, r.contentType, e)
				assert.NotContains(t, e, "stacktrace", "POST %s (%s): entry: %v", r.path, r.contentType, e)
				for _, v := range e {
					found = found || strings.Contains(str(v), r.reason)
				}
			}
			assert.True(t, found, "POST %s (%s): no log entry names the reason %q; entries: %v", r.path, r.contentType, r.reason, entries)
		}
	})

	t.Run("/convert answers a body over the limit with 413", func(t *testing.T) {
		// Expect: 100-continue, as a careful client sends a large body: the answer comes before
		// the body is sent, so the client reads it instead of a reset connection.
		body := bytes.Repeat([]byte{' '}, int(webhook.MaxRequestBytes)+1)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+webhookAddr+webhook.ConversionPath, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Expect", "100-continue")
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			ExpectContinueTimeout: 10 * time.Second,
			TLSClientConfig:       &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // see above
		}}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "answer: %s", answer)
		assert.Contains(t, string(answer), "the limit is "+strconv.FormatInt(webhook.MaxRequestBytes, 10)+" bytes")
	})

	for _, srv := range []struct{ name, addr string }{{"webhook", webhookAddr}, {"metrics", metricsAddr}} {
		t.Run("the "+srv.name+" server offers TLS 1.2 with ECDHE and AEAD ciphers only", func(t *testing.T) {
			var accepted []string
			for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
				if !slices.Contains(s.SupportedVersions, tls.VersionTLS12) {
					continue
				}
				if handshake(srv.addr, &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{s.ID}}) == nil { //nolint:gosec // probing the server
					accepted = append(accepted, s.Name)
					assert.Contains(t, tls12CipherSuites, s.ID, "%s accepted", s.Name)
				}
			}
			assert.NotEmpty(t, accepted, "no TLS 1.2 suite accepted")
			require.NoError(t, handshake(srv.addr, &tls.Config{MinVersion: tls.VersionTLS13}))
			require.Error(t, handshake(srv.addr, &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}), "TLS 1.1 accepted") //nolint:gosec // probing the server
		})
	}

	t.Run("/metrics answers only bearer tokens authorized for get /metrics", func(t *testing.T) {
		url := "https://" + metricsAddr + "/metrics"
		kube, err := kubernetes.NewForConfig(env.Config)
		require.NoError(t, err)
		reader := serviceAccountToken(ctx, t, kube, "metrics-reader", true)
		stranger := serviceAccountToken(ctx, t, kube, "metrics-stranger", false)

		if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil { //nolint:noctx // test
			_ = resp.Body.Close()
			assert.NotEqual(t, http.StatusOK, resp.StatusCode, "metrics served over plain HTTP")
		}
		get := func(token string) (int, string) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			require.NoError(t, err)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := insecure.Do(req)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(b)
		}
		code, _ := get("")
		assert.Equal(t, http.StatusUnauthorized, code, "no token")
		code, _ = get(stranger)
		assert.Equal(t, http.StatusForbidden, code, "a ServiceAccount without get /metrics")
		code, body := get(reader)
		require.Equal(t, http.StatusOK, code, "a ServiceAccount with get /metrics: %.300s", body)
		assert.Contains(t, body, "dynamo_webhook_requests_total")
	})
}

// serviceAccountToken creates ServiceAccount name in the operator's namespace — bound, when
// canRead, to a ClusterRole granting get on /metrics, as the chart's metrics-reader does — and
// returns a token for it.
func serviceAccountToken(ctx context.Context, t *testing.T, kube kubernetes.Interface, name string, canRead bool) string {
	t.Helper()
	_, err := kube.CoreV1().ServiceAccounts(operatorNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	if canRead {
		_, err = kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: operatorNS}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(operatorNS).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// handshake does a TLS handshake with addr under cfg (InsecureSkipVerify added).
func handshake(addr string, cfg *tls.Config) error {
	cfg.InsecureSkipVerify = true
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	return c.Close()
}

// logEntries parses every line the operator logged; each must be a JSON object.
func logEntries(t *testing.T, logs *testcluster.LogBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), "the operator logged a line that is not JSON: %s", sc.Text())
		out = append(out, e)
	}
	return out
}

func str(v any) string { s, _ := v.(string); return s }

type errString string

func (e errString) Error() string { return string(e) }
