package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/testcluster"
)

// runOperatorEnv makes this test binary run the operator's main() with its arguments instead
// of the tests: a replica is a real process with its own flags, logs and signal handling.
const runOperatorEnv = "DYNAMO_OPERATOR_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runOperatorEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// operatorProcess is one replica of the operator, run from this test binary.
type operatorProcess struct {
	name      string
	port      int
	probeAddr string
	logs      testcluster.LogBuffer
	cmd       *exec.Cmd
	done      chan error
}

// startOperatorProcess runs a replica with the flags the chart gives it (leader election at
// its defaults), serving webhooks on port.
func startOperatorProcess(t *testing.T, name, kubeconfig string, port int) *operatorProcess {
	t.Helper()
	p := &operatorProcess{name: name, port: port, probeAddr: freeLoopbackAddr(t), done: make(chan error, 1)}
	logFile, err := os.Create(filepath.Join(t.TempDir(), name+".log")) //nolint:gosec // G304: a file in the test's own temporary directory
	require.NoError(t, err)
	plumbing := clusterWidePlumbing
	plumbing.port = int32(port)                              //nolint:gosec // G115: a TCP port
	p.cmd = exec.Command(os.Args[0], append(plumbing.args(), //nolint:gosec // G204: this test binary, re-run as the operator
		"--kubeconfig="+kubeconfig,
		"--operator-namespace="+operatorNS,
		"--conversion-crd="+dgdrCRD,
		"--webhook-cert-dir="+t.TempDir(),
		"--metrics-bind-address=0",
		"--health-probe-bind-address="+p.probeAddr,
		"--cert-check-interval=1s",
	)...)
	p.cmd.Env = append(os.Environ(), runOperatorEnv+"=1", "POD_NAMESPACE="+operatorNS, "POD_NAME=dynamo-operator-"+name)
	p.cmd.Stdout = io.MultiWriter(&p.logs, logFile)
	p.cmd.Stderr = p.cmd.Stdout
	require.NoError(t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait(); _ = logFile.Close() }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("log of replica %s:\n%s", name, p.logs.String())
		}
	})
	return p
}

// stop sends SIGTERM, as the kubelet does, and waits for the process to exit.
func (p *operatorProcess) stop(t *testing.T) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("replica %s exited with an error after SIGTERM: %v", p.name, err)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		err := <-p.done
		t.Errorf("replica %s did not exit within 30s of SIGTERM; killed (%v)", p.name, err)
	}
}

// count is how many of the replica's log lines contain s.
func (p *operatorProcess) count(s string) int { return strings.Count(p.logs.String(), s) }

// certWrites counts the log lines saying the replica generated a certificate, stored the
// Secret or injected a caBundle.
func (p *operatorProcess) certWrites() int {
	n := 0
	for _, s := range []string{"cert-controller: Secret is not usable; generating", "cert-controller: created Secret", "cert-controller: updated Secret", "cert-controller: injected CA bundle"} {
		n += p.count(s)
	}
	return n
}

func (p *operatorProcess) ready() error {
	resp, err := http.Get("http://" + p.probeAddr + "/readyz") //nolint:noctx // a probe, as the kubelet's
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("replica %s: /readyz %s", p.name, resp.Status)
	}
	return nil
}

// denies sends an invalid DynamoGraphDeployment straight to the replica's validating webhook,
// verifying its certificate against caPEM as the API server would, and expects a denial.
func (p *operatorProcess) denies(caPEM []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("no CA to trust")
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: webhookService + "." + operatorNS + ".svc", MinVersion: tls.VersionTLS12},
	}}
	obj, err := json.Marshal(&v1alpha1.DynamoGraphDeployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "no-services", Namespace: "team-x"},
	})
	if err != nil {
		return err
	}
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("replica-" + p.name),
			Kind:      metav1.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "DynamoGraphDeployment"},
			Resource:  metav1.GroupVersionResource{Group: "nvidia.com", Version: "v1alpha1", Resource: "dynamographdeployments"},
			Operation: admissionv1.Create, Namespace: "team-x", Name: "no-services",
			Object: runtime.RawExtension{Raw: obj},
		},
	})
	if err != nil {
		return err
	}
	path, err := validatingPath("vdynamographdeployment.nvidia.com")
	if err != nil {
		return err
	}
	resp, err := hc.Post("https://127.0.0.1:"+strconv.Itoa(p.port)+path, "application/json", bytes.NewReader(body)) //nolint:noctx // bounded by the client's timeout
	if err != nil {
		return fmt.Errorf("replica %s: %w", p.name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
		return fmt.Errorf("replica %s: decoding the AdmissionReview response (%s): %w", p.name, resp.Status, err)
	}
	if review.Response == nil || review.Response.Allowed {
		return fmt.Errorf("replica %s: an invalid DynamoGraphDeployment was not denied: %+v", p.name, review.Response)
	}
	return nil
}

func validatingPath(webhookName string) (string, error) {
	vwc, _, err := testcluster.GeneratedWebhookConfigurations()
	if err != nil {
		return "", err
	}
	for _, w := range vwc.Webhooks {
		if w.Name == webhookName && w.ClientConfig.Service != nil && w.ClientConfig.Service.Path != nil {
			return *w.ClientConfig.Service.Path, nil
		}
	}
	return "", fmt.Errorf("no validating webhook %s in the generated manifests", webhookName)
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestTwoReplicas runs two replicas of the operator as processes, started together on a fresh
// install (issue 15, finding 6): exactly one leads — it alone generates the certificate, injects
// the caBundles and runs the reconcilers — and both serve the webhooks with the Secret's
// certificate. When the leader stops gracefully, the other takes over at once.
func TestTwoReplicas(t *testing.T) {
	env := testcluster.Start(t, testcluster.WithServiceCIDR(serviceCIDR))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := env.Client
	clusterWidePlumbing.install(ctx, t, c)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-x"}}))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, env.Environment.KubeConfig, 0o600))

	// a listens behind the Service (the API server's path), b beside it.
	replicas := []*operatorProcess{
		startOperatorProcess(t, "a", kubeconfig, webhookPortTest),
		startOperatorProcess(t, "b", kubeconfig, webhookPortTest+1),
	}
	for _, p := range replicas {
		eventually(t, "replica "+p.name+" to be ready", p.ready)
	}
	var secret corev1.Secret
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: operatorNS, Name: "webhook-server-cert"}, &secret))
	ca := secret.Data["ca.crt"]
	eventually(t, "every caBundle to hold the Secret's CA", func() error { return caBundlesContain(ctx, c, ca) })

	t.Run("both replicas serve the webhooks with the Secret's certificate", func(t *testing.T) {
		for _, p := range replicas {
			eventually(t, "replica "+p.name+" to deny an invalid object", func() error { return p.denies(ca) })
		}
	})

	var leader, follower *operatorProcess
	t.Run("exactly one replica leads: it alone generates, injects and runs the reconcilers", func(t *testing.T) {
		var leaders []string
		for _, p := range replicas {
			if p.count("cert-controller: elected leader") > 0 {
				leaders = append(leaders, p.name)
				leader = p
			} else {
				follower = p
			}
		}
		require.Len(t, leaders, 1, "replicas that logged being elected: %v", leaders)
		var lease coordinationv1.Lease
		require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: operatorNS, Name: "dynamo-operator-leader"}, &lease))
		assert.NotEmpty(t, ptrValue(lease.Spec.HolderIdentity), "leader Lease %s/dynamo-operator-leader has no holder", operatorNS)

		assert.Equal(t, 1, leader.count("cert-controller: created Secret"), "the leader creates the Secret once")
		assert.Positive(t, leader.count("cert-controller: injected CA bundle"), "the leader injects the caBundles")
		assert.Zero(t, follower.certWrites(), "replica %s does not lead, yet generated, stored or injected", follower.name)
		eventually(t, "the leader to start the reconcilers", func() error {
			if leader.count("Starting Controller") == 0 {
				return errors.New("no \"Starting Controller\" logged")
			}
			return nil
		})
		assert.Zero(t, follower.count("Starting Controller"), "replica %s does not lead, yet started reconcilers", follower.name)

		// A reconciler's work is done once, by the leader.
		good := &v1alpha1.DynamoGraphDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "graph", Namespace: "team-x"},
			Spec:       v1alpha1.DynamoGraphDeploymentSpec{BackendFramework: "vllm", Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"frontend": {}}},
		}
		eventually(t, "a valid DynamoGraphDeployment to be admitted", func() error { return client.IgnoreAlreadyExists(c.Create(ctx, good)) })
		eventually(t, "the leader to add its finalizer", func() error {
			var got v1alpha1.DynamoGraphDeployment
			if err := c.Get(ctx, client.ObjectKeyFromObject(good), &got); err != nil {
				return err
			}
			if len(got.Finalizers) == 0 {
				return errors.New("no finalizer yet")
			}
			return nil
		})
	})
	if leader == nil || follower == nil {
		t.FailNow()
	}

	t.Run("the leader stops gracefully: the other replica leads at once and takes over generation", func(t *testing.T) {
		began := time.Now()
		leader.stop(t)
		eventually(t, "replica "+follower.name+" to be elected", func() error {
			if follower.count("cert-controller: elected leader") == 0 {
				return errors.New("not elected yet")
			}
			return nil
		})
		took := time.Since(began)
		t.Logf("replica %s led %s after replica %s got SIGTERM", follower.name, took.Round(time.Millisecond), leader.name)
		assert.Less(t, took, 10*time.Second, "the stopping leader releases the Lease; waiting for it to expire (15s) is not a hand-over")

		require.NoError(t, c.Delete(ctx, &secret))
		eventually(t, "the new leader to store a new Secret", func() error {
			var s corev1.Secret
			if err := c.Get(ctx, types.NamespacedName{Namespace: operatorNS, Name: "webhook-server-cert"}, &s); err != nil {
				return err
			}
			if bytes.Equal(s.Data["ca.crt"], ca) {
				return errors.New("still the old CA")
			}
			ca = s.Data["ca.crt"]
			return nil
		})
		eventually(t, "replica "+follower.name+" to serve the new certificate", func() error { return follower.denies(ca) })
		assert.Equal(t, 1, follower.count("cert-controller: created Secret"))
	})
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
