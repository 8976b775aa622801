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

// restrictedPlumbing is the chart's plumbing of a release restricted to ns and running there,
// on a free port.
func restrictedPlumbing(t *testing.T, ns string) webhookPlumbing {
	t.Helper()
	return webhookPlumbing{namespace: ns, port: int32(freePort(t)), restrictedTo: ns} //nolint:gosec // G115: a TCP port
}

// restrictedArgs are the flags of an operator of p named pod.
func restrictedArgs(t *testing.T, p webhookPlumbing, pod string, extra ...string) []string {
	t.Helper()
	args := append([]string{
		"--operator-namespace=" + p.namespace,
		"--restrict-to-namespace=" + p.restrictedTo,
		"--pod-name=" + pod,
		"--webhook-cert-dir=" + t.TempDir(),
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:0",
		"--lease-duration=6s", "--lease-renew-interval=2s", "--lease-grace-period=2s",
	}, p.args()...)
	return append(args, extra...)
}

// ownProcessEnv marks a test binary that inOwnProcess started to run one test alone.
const ownProcessEnv = "DYNAMO_OPERATOR_TEST_OWN_PROCESS"

// inOwnProcess reports whether the test runs alone in this process. If it does not, it runs the
// test alone in a new process of this test binary, reports that run's result as the test's
// own and returns false: the caller returns at once.
func inOwnProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(ownProcessEnv) != "" {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1") //nolint:gosec // G204: this test binary, re-run
	cmd.Env = append(os.Environ(), ownProcessEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s, run alone in a process of its own: %v\n%s", t.Name(), err, out)
	}
	return false
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
	// run() in this process, to break its connection; alone in a process of its own, since
	// controller-runtime refuses a second controller of the same name in one process.
	if !inOwnProcess(t) {
		return
	}
	env := testcluster.Start(t, testcluster.WithServiceCIDR(serviceCIDR))
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns, pod = "team-lost", "dynamo-operator-lost"
	plumbing := restrictedPlumbing(t, ns)
	plumbing.install(ctx, t, env.Client)

	// The API server stores the Lease, and its answer never reaches the operator — a
	// connection that broke after the request went out.
	cfg := rest.CopyConfig(env.Config)
	var lost atomic.Bool
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			// The namespace lock's create, not leader election's (the same namespace here).
			lockCreate := false
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/namespaces/"+ns+"/leases") && r.GetBody != nil {
				body, err := r.GetBody()
				if err != nil {
					return nil, err
				}
				raw, _ := io.ReadAll(body)
				lockCreate = strings.Contains(string(raw), namespacescope.LeaseName) // JSON or protobuf

			}
			resp, err := rt.RoundTrip(r)
			if err == nil && lockCreate && lost.CompareAndSwap(false, true) {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				return nil, errors.New("connection reset by peer after the request was sent")
			}
			return resp, err
		})
	}
	opts, err := parseOptions(flag.NewFlagSet("test", flag.ContinueOnError), restrictedArgs(t, plumbing, pod))
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
	env := testcluster.Start(t, testcluster.WithServiceCIDR(serviceCIDR))
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, pod, leaderLease = "team-leader", "dynamo-operator-leader-test", "dynamo-operator-leader"
	plumbing := restrictedPlumbing(t, ns)
	plumbing.install(ctx, t, env.Client)

	p := startRestricted(t, env, restrictedArgs(t, plumbing, pod, "--leader-elect=true", "--leader-election-id="+leaderLease))

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

// A webhook server that cannot listen is a fatal exit before the Lease: the served probe never
// comes back, so the operator never takes it (with the Lease taken before serving, the
// namespace was excluded, and validated by nobody, until the exit deleted it).
func TestAWebhookPortAlreadyTakenExitsWithoutTakingTheLease(t *testing.T) {
	env := testcluster.Start(t, testcluster.WithServiceCIDR(serviceCIDR))
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, pod = "team-port", "dynamo-operator-port"
	// Another process's listener on the webhook port, on every interface as the webhook
	// server binds it, so that the two surely collide.
	taken, err := net.Listen("tcp", ":0") //nolint:gosec // G102: see above; the port is closed at the end of the test
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	plumbing := webhookPlumbing{namespace: ns, port: int32(taken.Addr().(*net.TCPAddr).Port), restrictedTo: ns} //nolint:gosec // G115: a TCP port
	plumbing.install(ctx, t, env.Client)

	p := startRestricted(t, env, restrictedArgs(t, plumbing, pod))
	assert.Equal(t, 1, p.exited(t, time.Minute, "starting with its webhook port taken"), "exit code")
	assert.Contains(t, p.logs.String(), "address already in use")
	if strings.Contains(p.logs.String(), "created the namespace lock Lease") {
		t.Error("expected an operator whose webhooks never served to leave its namespace to the cluster-wide operator; it logged `created the namespace lock Lease`")
	}
	if l := leaseIn(ctx, t, kube, ns); l != nil {
		t.Errorf("expected the operator whose webhook server could not listen to leave no Lease %s/%s; it is there, held by %q",
			ns, namespacescope.LeaseName, ptr.Deref(l.Spec.HolderIdentity, ""))
	}
}

// The start window: until the API server reaches a restricted operator's webhooks through its
// Service, the operator serves but leaves its namespace's Lease alone, so the cluster-wide
// operator keeps validating there; once they answer, it takes the Lease. Here the Service is
// missing at first (as a node's routing that does not follow the new pod yet), so the API
// server cannot call the webhooks, and with failurePolicy Ignore it admits the probes unjudged.
func TestARestrictedOperatorTakesItsLeaseOnlyOnceTheAPIServerReachesItsWebhooks(t *testing.T) {
	env := testcluster.Start(t, testcluster.WithServiceCIDR(serviceCIDR))
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, pod = "team-served", "dynamo-operator-served"
	plumbing := restrictedPlumbing(t, ns)
	plumbing.install(ctx, t, env.Client)
	service, err := kube.CoreV1().Services(ns).Get(ctx, webhookService, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, kube.CoreV1().Services(ns).Delete(ctx, webhookService, metav1.DeleteOptions{}))

	p := startRestricted(t, env, restrictedArgs(t, plumbing, pod))
	eventually(t, "the operator to serve", func() error {
		if !strings.Contains(p.logs.String(), "Starting webhook server") {
			return errors.New("no `Starting webhook server` logged yet")
		}
		return nil
	})
	// Long enough for many probes.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if l := leaseIn(ctx, t, kube, ns); l != nil {
			t.Fatalf("expected no Lease %s/%s while the API server cannot reach the operator's webhooks (no Service); it was taken by %q: "+
				"namespace %s would be validated by nobody", ns, namespacescope.LeaseName, ptr.Deref(l.Spec.HolderIdentity, ""), ns)
		}
	}

	service.ResourceVersion, service.UID = "", ""
	_, err = kube.CoreV1().Services(ns).Create(ctx, service, metav1.CreateOptions{})
	require.NoError(t, err, "recreating Service %s/%s", ns, webhookService)
	eventually(t, "the operator to take its Lease once its webhooks answer through the Service", func() error {
		if l := leaseIn(ctx, t, kube, ns); l == nil || ptr.Deref(l.Spec.HolderIdentity, "") != pod {
			return errors.New("no Lease held by " + pod)
		}
		return nil
	})
	logs := p.logs.String()
	assert.Contains(t, logs, "waiting for the API server to reach this operator's webhooks", "the wait, logged with what the probe saw")
	assert.Contains(t, logs, "the API server reaches this operator's webhooks through its Service")
}
