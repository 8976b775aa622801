package doctor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCertControllerRBAC asks the test API server's RBAC authorizer, through
// SubjectAccessReviews, about the operator's ServiceAccount.
func TestCertControllerRBAC(t *testing.T) {
	cases := []struct {
		name   string
		mode   string
		mutate func(t *testing.T, r *release, objs []client.Object) []client.Object
		// denied are the permissions the cause must list (none: the check passes).
		denied []string
		detail string
	}{
		{name: "the chart's rules grant everything the cert-controller does", mode: "automatic",
			detail: "allowed: 10 requests of the automatic-mode cert-controller"},
		{
			name: "T10 Secret RoleBinding missing: cannot create or update Secrets", mode: "automatic",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.deployment()+"-certs", drop[*rbacv1.RoleBinding])
			},
			denied: []string{"create secrets in namespace", "get secrets/webhook-server-cert", "update secrets/webhook-server-cert", "watch secrets/webhook-server-cert"},
		},
		{
			name: "T10 ClusterRole cannot update the MutatingWebhookConfiguration", mode: "automatic",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.deployment(), func(cr *rbacv1.ClusterRole) bool {
					cr.Rules[1].Verbs = []string{"get"}
					return true
				})
			},
			denied: []string{"update mutatingwebhookconfigurations.admissionregistration.k8s.io/"},
		},
		{
			name: "T10 ClusterRole names another webhook configuration", mode: "automatic",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return edit(t, objs, r.deployment(), func(cr *rbacv1.ClusterRole) bool {
					cr.Rules[0].ResourceNames = []string{"someone-else-validating"}
					return true
				})
			},
			denied: []string{"get validatingwebhookconfigurations.admissionregistration.k8s.io/", "update validatingwebhookconfigurations.admissionregistration.k8s.io/"},
		},
		{
			name: "cert-manager mode needs no cert-controller permissions", mode: "cert-manager",
			mutate: func(t *testing.T, r *release, objs []client.Object) []client.Object {
				return nil
			},
			detail: "not needed: in cert-manager mode the operator never writes the Secret or the caBundles",
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r := newRelease(t)
			r.name, r.namespace, r.mode = fmt.Sprintf("rbac%d", i), fmt.Sprintf("rbac-%d", i), tc.mode
			objs := r.objects(t)
			keep := []client.Object{namespaceObject(r.namespace)}
			for _, o := range objs {
				switch o.(type) {
				case *corev1.ServiceAccount, *appsv1.Deployment:
					keep = append(keep, o)
				}
			}
			rbac := r.rbacObjects()
			if tc.mutate != nil {
				rbac = tc.mutate(t, r, rbac)
			}
			for _, o := range append(keep, rbac...) {
				apply(ctx, t, env.Client, o)
			}
			d, err := New(env.Config, Options{Release: r.name, Namespace: r.namespace})
			require.NoError(t, err)
			// The RBAC authorizer sees the bindings through informers: ask again until its
			// answer matches the objects just applied, for at most 10s.
			var (
				report Report
				res    Result
			)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				report = d.run(ctx, checksByID(t, CheckDeployment, CheckRBAC))
				res, _ = report.Find(CheckRBAC)
				deniedNow := 0
				if res.Status != StatusPass {
					deniedNow = strings.Count(res.Cause, ", ") + 1
				}
				if deniedNow == len(tc.denied) || time.Now().After(deadline) {
					break
				}
			}
			assert.Equal(t, fmt.Sprintf("ServiceAccount %s/%s-operator has the cert-controller's permissions", r.namespace, r.name), res.Title)
			if len(tc.denied) == 0 {
				require.Equal(t, StatusPass, res.Status, "cause: %s\ndetails: %v", res.Cause, res.Details)
				assert.Contains(t, res.Details, tc.detail)
				return
			}
			root := requireOneRoot(t, report, CheckRBAC, "T10", nil, nil)
			user := fmt.Sprintf("system:serviceaccount:%s:%s-operator", r.namespace, r.name)
			assert.Contains(t, root.Cause, "T10 cert-controller RBAC missing (cannot create Secrets / patch webhook configurations): "+user+" cannot ")
			for _, want := range tc.denied {
				assert.Contains(t, root.Cause, want)
			}
			assert.Equal(t, len(tc.denied), strings.Count(root.Cause, ", ")+1, "exactly the denied permissions are listed: %s", root.Cause)
			assert.Contains(t, root.Fix, "restore RBAC:\nhelm upgrade "+r.name+" charts/dynamo-operator --namespace "+r.namespace+" --reuse-values")
			assert.Contains(t, root.Fix, "kubectl auth can-i ")
			assert.Contains(t, root.Fix, "--as="+user)
		})
	}
}
