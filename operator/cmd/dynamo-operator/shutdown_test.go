package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gauntlet-dev/gauntlet/operator/internal/namespacescope"
	"github.com/gauntlet-dev/gauntlet/operator/internal/testcluster"
)

// The fatal exits of a namespace-restricted operator, each against a real API server: every
// one must leave the namespace without its lock Lease.
//
// The file sorts after main_test.go on purpose: TestOperatorServesWebhooksThroughTheAPIServer
// installs the process's logger, which controller-runtime accepts only within 30 s of the
// first use of its log (then it settles on a null logger for good); these tests take longer.

// newBareManager is a manager on env with nothing served, for the exit helpers.
func newBareManager(t *testing.T, cfg *rest.Config) manager.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err, "creating a manager")
	return mgr
}

func TestARunnablesPanicStopsTheManagerWithAnError(t *testing.T) {
	env := testcluster.Start(t)
	mgr := newBareManager(t, env.Config)
	require.NoError(t, addPanicSafe(mgr, "test runnable", manager.RunnableFunc(func(context.Context) error {
		panic("boom: a runnable's bug")
	})))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Without panicSafe the panic ends this test binary.
	err := startManager(ctx, nil, mgr)
	require.Error(t, err, "the manager ran on after its runnable panicked")
	assert.Contains(t, err.Error(), "the test runnable panicked: boom: a runnable's bug")
}

func TestPanicSafeKeepsTheLeaderElectionNeeds(t *testing.T) {
	holder, err := namespacescope.NewHolder(kubernetes.New(nil).CoordinationV1(), "team-a", "pod", namespacescope.DefaultTimings())
	require.NoError(t, err)
	assert.False(t, panicSafe{name: "holder", Runnable: holder}.NeedLeaderElection(), "the namespace lock holder must run on every replica")
	assert.True(t, panicSafe{name: "func", Runnable: manager.RunnableFunc(func(context.Context) error { return nil })}.NeedLeaderElection(),
		"a runnable that does not say must stay a leader's, as the manager assumes")
}

func TestASecondSignalEndsTheRunWithoutWaitingForTheShutdown(t *testing.T) {
	env := testcluster.Start(t)
	mgr := newBareManager(t, env.Config)
	// A runnable that takes its time to stop holds the manager's shutdown for its grace period
	// (30 s).
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	require.NoError(t, mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		<-release
		return nil
	})))
	ctx, cancel := context.WithCancel(context.Background())
	forced := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- startManager(ctx, forced, mgr) }()
	time.Sleep(time.Second) // the manager has started its runnables
	cancel()
	select {
	case err := <-done:
		t.Fatalf("the manager stopped before its slow runnable did (%v); the test proves nothing", err)
	case <-time.After(time.Second):
	}
	close(forced)
	select {
	case err := <-done:
		require.ErrorIs(t, err, errForcedExit)
	case <-time.After(5 * time.Second):
		t.Fatal("startManager did not return within 5s of the second signal: the process would exit from the signal handler and skip the release of the Lease")
	}
}

// restrictedArgs are the flags of an operator restricted to ns (and running there) named pod.
func restrictedArgs(t *testing.T, ns, pod string, extra ...string) []string {
	t.Helper()
	return append([]string{
		"--operator-namespace=" + ns,
		"--restrict-to-namespace=" + ns,
		"--pod-name=" + pod,
		"--webhook-service=" + webhookService,
		"--webhook-cert-dir=" + t.TempDir(),
		"--webhook-port=" + strconv.Itoa(freePort(t)),
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:0",
		"--lease-duration=6s", "--lease-renew-interval=2s", "--lease-grace-period=2s",
	}, extra...)
}

// restrictedProcess is a restricted operator run from this test binary as a process of its
// own: its exit code is main's, and controller-runtime's controller names (unique per
// process) do not clash with the other tests'.
type restrictedProcess struct {
	logs testcluster.LogBuffer
	done chan error
}

func startRestricted(t *testing.T, env *testcluster.Env, args []string) *restrictedProcess {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, env.Environment.KubeConfig, 0o600))
	p := &restrictedProcess{done: make(chan error, 1)}
	cmd := exec.Command(os.Args[0], append([]string{"--kubeconfig=" + kubeconfig}, args...)...) //nolint:gosec // G204: this test binary, re-run as the operator
	cmd.Env = append(os.Environ(), runOperatorEnv+"=1")
	cmd.Stdout, cmd.Stderr = &p.logs, &p.logs
	require.NoError(t, cmd.Start())
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // gone already unless the test failed
		if t.Failed() {
			t.Logf("operator log:\n%s", p.logs.String())
		}
	})
	return p
}

// exited waits up to timeout for the process to exit and returns its exit code.
func (p *restrictedProcess) exited(t *testing.T, timeout time.Duration, after string) int {
	t.Helper()
	select {
	case err := <-p.done:
		var exit *exec.ExitError
		if err == nil {
			return 0
		}
		require.ErrorAs(t, err, &exit)
		return exit.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("the operator did not exit within %s of %s", timeout, after)
		return 0
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	addr := freeAddr(t)
	port, err := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])
	require.NoError(t, err, "port of %s", addr)
	return port
}

func createNamespace(ctx context.Context, t *testing.T, kube kubernetes.Interface, name string) {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err, "creating namespace %s", name)
}

// leaseIn is the namespace lock Lease in ns, nil when there is none.
func leaseIn(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns string) *coordinationv1.Lease {
	t.Helper()
	l, err := kube.CoordinationV1().Leases(ns).Get(ctx, namespacescope.LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err, "reading Lease %s/%s", ns, namespacescope.LeaseName)
	return l
}

// roundTripperFunc adapts a function to http.RoundTripper.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestALeaseWhoseCreateAnswerWasLostIsDeletedOnTheWayOut(t *testing.T) {
	env := testcluster.Start(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns, pod = "team-lost", "dynamo-operator-lost"
	createNamespace(ctx, t, kube, ns)

	// The API server stores the Lease, and its answer never reaches the operator — a
	// connection that broke after the request went out.
	cfg := rest.CopyConfig(env.Config)
	var lost atomic.Bool
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/namespaces/"+ns+"/leases") && lost.CompareAndSwap(false, true) {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				return nil, errors.New("connection reset by peer after the request was sent")
			}
			return resp, err
		})
	}
	opts, err := parseOptions(flag.NewFlagSet("test", flag.ContinueOnError), restrictedArgs(t, ns, pod))
	require.NoError(t, err)
	err = run(ctx, nil, cfg, opts)
	require.Error(t, err, "the operator started although it could not tell whether it holds its Lease")
	assert.Contains(t, err.Error(), "creating Lease "+ns+"/"+namespacescope.LeaseName)
	require.True(t, lost.Load(), "the Lease was never created; the test proves nothing")
	if l := leaseIn(ctx, t, kube, ns); l != nil {
		t.Errorf("expected the operator that failed to acquire its Lease to delete the one its lost create stored; it is still there, held by %q: namespace %s stays excluded until it expires",
			ptr.Deref(l.Spec.HolderIdentity, ""), ns)
	}
}

func TestLosingTheLeaderElectionDeletesTheLeaseBeforeTheProcessEnds(t *testing.T) {
	env := testcluster.Start(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, pod, leaderLease = "team-leader", "dynamo-operator-leader-test", "dynamo-operator-leader"
	createNamespace(ctx, t, kube, ns)

	p := startRestricted(t, env, restrictedArgs(t, ns, pod, "--leader-elect=true", "--leader-election-id="+leaderLease))

	eventually(t, "the operator to lead and hold its namespace's Lease", func() error {
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, leaderLease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") == "" || leaseIn(ctx, t, kube, ns) == nil {
			return errors.New("not yet")
		}
		return nil
	})
	// Someone else takes the leader-election Lease (a user's edit, another release with the
	// same --leader-election-id): the leader cannot renew it and loses the election.
	_, err := kube.CoordinationV1().Leases(ns).Patch(ctx, leaderLease, types.MergePatchType,
		[]byte(`{"spec":{"holderIdentity":"someone-else"}}`), metav1.PatchOptions{})
	require.NoError(t, err, "taking Lease %s/%s over", ns, leaderLease)

	assert.Equal(t, 1, p.exited(t, time.Minute, "losing its leader election"), "exit code")
	assert.Contains(t, p.logs.String(), "leader election lost")
	if l := leaseIn(ctx, t, kube, ns); l != nil {
		t.Errorf("expected the operator that lost its leader election to delete Lease %s/%s before it exited; it is still there, held by %q",
			ns, namespacescope.LeaseName, ptr.Deref(l.Spec.HolderIdentity, ""))
	}
}

func TestAWebhookPortAlreadyTakenDeletesTheLeaseBeforeTheProcessEnds(t *testing.T) {
	env := testcluster.Start(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, pod = "team-port", "dynamo-operator-port"
	createNamespace(ctx, t, kube, ns)
	// Another process's listener on the webhook port, on every interface as the webhook
	// server binds it, so that the two surely collide.
	taken, err := net.Listen("tcp", ":0") //nolint:gosec // G102: see above; the port is closed at the end of the test
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	port := taken.Addr().(*net.TCPAddr).Port

	p := startRestricted(t, env, restrictedArgs(t, ns, pod, "--webhook-port="+strconv.Itoa(port)))
	assert.Equal(t, 1, p.exited(t, time.Minute, "starting with its webhook port taken"), "exit code")
	assert.Contains(t, p.logs.String(), "address already in use")
	require.Contains(t, p.logs.String(), "created the namespace lock Lease", "the operator failed before it held its Lease; the test proves nothing")
	if l := leaseIn(ctx, t, kube, ns); l != nil {
		t.Errorf("expected the operator whose webhook server could not listen to delete Lease %s/%s before it exited; it is still there, held by %q",
			ns, namespacescope.LeaseName, ptr.Deref(l.Spec.HolderIdentity, ""))
	}
}
