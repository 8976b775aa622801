package namespacescope_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gauntlet-dev/gauntlet/operator/internal/namespacescope"
	"github.com/gauntlet-dev/gauntlet/operator/internal/testcluster"
)

// One control plane for the package: each start costs seconds.
var (
	env   *testcluster.Env
	admin kubernetes.Interface
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	var err error
	env, err = testcluster.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	admin, err = kubernetes.NewForConfig(env.Config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "building a clientset for the test control plane:", err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test control plane:", err)
	}
	os.Exit(code)
}

// Short timings keep the integration tests within seconds; the arithmetic is the same as with
// the defaults.
var fastTimings = namespacescope.Timings{LeaseDuration: 2 * time.Second, RenewInterval: 500 * time.Millisecond, GracePeriod: time.Second}

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := admin.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	require.NoError(t, err, "creating a namespace %s-*", prefix)
	t.Cleanup(func() {
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// userClient authenticates as a new user with a client certificate; RBAC decides what it may do.
func userClient(t *testing.T, name string, groups ...string) kubernetes.Interface {
	t.Helper()
	u, err := env.Environment.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	require.NoError(t, err, "provisioning user %s", name)
	c, err := kubernetes.NewForConfig(u.Config())
	require.NoError(t, err, "building a clientset for user %s", name)
	return c
}

// holderRole is what the chart grants a namespace-restricted operator for its lock Lease.
var holderRole = []rbacv1.PolicyRule{{
	APIGroups: []string{"coordination.k8s.io"},
	Resources: []string{"leases"},
	Verbs:     []string{"get", "create", "update", "delete"},
}}

// grantInNamespace binds a Role with rules to subject in ns and returns the RoleBinding's name.
func grantInNamespace(t *testing.T, ns string, subject rbacv1.Subject, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	const name = "dynamo-operator-namespace-lock"
	_, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules,
	}, metav1.CreateOptions{})
	require.NoError(t, err, "creating Role %s/%s", ns, name)
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "creating RoleBinding %s/%s", ns, name)
	user, groups := subject.Name, []string(nil)
	if subject.Kind == rbacv1.ServiceAccountKind {
		user, groups = serviceAccountUser(subject.Namespace, subject.Name)
	}
	for _, rule := range rules {
		for _, verb := range rule.Verbs {
			awaitAllowed(t, user, groups, authorizationv1.ResourceAttributes{
				Namespace: ns, Group: rule.APIGroups[0], Resource: rule.Resources[0], Verb: verb,
			})
		}
	}
	return name
}

// serviceAccountUser is the user name and groups the API server authenticates the
// ServiceAccount ns/name as.
func serviceAccountUser(ns, name string) (string, []string) {
	return "system:serviceaccount:" + ns + ":" + name, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
}

// allowed asks the API server's authorizer, as `kubectl auth can-i --as` does, whether user
// (member of groups) may do what attrs describe.
func allowed(t *testing.T, user string, groups []string, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	review, err := admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &attrs},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "creating SubjectAccessReview for %s %s %s in %q", user, attrs.Verb, attrs.Resource, attrs.Namespace)
	return review.Status.Allowed
}

// awaitAllowed waits until user may do what attrs describe. The RBAC authorizer reads Roles and
// bindings through informers, so a grant made a moment ago can still be denied for a while.
func awaitAllowed(t *testing.T, user string, groups []string, attrs authorizationv1.ResourceAttributes) {
	t.Helper()
	where := "in all namespaces"
	if attrs.Namespace != "" {
		where = "in " + attrs.Namespace
	}
	eventually(t, 10*time.Second, fmt.Sprintf("%s may %s %s %s", user, attrs.Verb, attrs.Resource, where), func() bool {
		return allowed(t, user, groups, attrs)
	})
}

func getLease(t *testing.T, ns string) *coordinationv1.Lease {
	t.Helper()
	lease, err := admin.CoordinationV1().Leases(ns).Get(context.Background(), namespacescope.LeaseName, metav1.GetOptions{})
	require.NoError(t, err, "getting Lease %s/%s", ns, namespacescope.LeaseName)
	return lease
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			require.Failf(t, "timed out", "after %s waiting until %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func gauge(t *testing.T, g *prometheus.GaugeVec, ns string) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, g.WithLabelValues(ns).Write(&m), "reading gauge for %s", ns)
	return m.GetGauge().GetValue()
}

// logRecorder is a logr sink that keeps every message with its namespace key, to assert that a
// transition is logged exactly once for a namespace.
type logRecorder struct {
	mu      sync.Mutex
	entries []logEntry
}

type logEntry struct{ namespace, msg string }

func (r *logRecorder) logger() logr.Logger { return logr.New(&recordingSink{r: r}) }

// count is how often msg was logged for namespace.
func (r *logRecorder) count(namespace, msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.entries {
		if e.namespace == namespace && e.msg == msg {
			n++
		}
	}
	return n
}

func (r *logRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	lines := make([]string, 0, len(r.entries))
	for _, e := range r.entries {
		lines = append(lines, e.namespace+": "+e.msg)
	}
	return strings.Join(lines, "\n")
}

type recordingSink struct{ r *logRecorder }

func (s *recordingSink) Init(logr.RuntimeInfo)          {}
func (s *recordingSink) Enabled(level int) bool         { return level == 0 }
func (s *recordingSink) WithValues(...any) logr.LogSink { return s }
func (s *recordingSink) WithName(string) logr.LogSink   { return s }
func (s *recordingSink) Info(_ int, msg string, kv ...any) {
	e := logEntry{msg: msg}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "namespace" {
			e.namespace, _ = kv[i+1].(string)
		}
	}
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.entries = append(s.r.entries, e)
}
func (s *recordingSink) Error(err error, msg string, kv ...any) {
	s.Info(0, msg+": "+err.Error(), kv...)
}
