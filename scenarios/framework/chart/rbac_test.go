package chart_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestRBACClusterWide(t *testing.T) {
	o := render(t, "platform-system", "")
	assert.ElementsMatch(t, []string{"dynamo-operator", "dynamo-operator-metrics-auth", "dynamo-metrics-reader"}, o.names("ClusterRole"))
	role := get[rbacv1.ClusterRole](t, o, "ClusterRole", "dynamo-operator")
	binding := get[rbacv1.ClusterRoleBinding](t, o, "ClusterRoleBinding", "dynamo-operator")
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "dynamo-operator"}, binding.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "dynamo-operator", Namespace: "platform-system"}}, binding.Subjects)
	get[corev1.ServiceAccount](t, o, "ServiceAccount", "dynamo-operator")

	for _, verb := range []string{"get", "list", "watch"} {
		assert.True(t, allows(role.Rules, "coordination.k8s.io", "leases", verb, ""), "cluster-wide operator may %s namespace Leases everywhere", verb)
	}
	for _, verb := range []string{"create", "update", "delete"} {
		assert.False(t, allows(role.Rules, "coordination.k8s.io", "leases", verb, ""), "cluster-wide operator only reads Leases (%s denied)", verb)
	}
	assertDynamoRules(t, role.Rules)
	assert.Equal(t, []string{"dynamo-operator-certs", "dynamo-operator-leader-election"}, o.names("Role"), "the namespaced Roles are the certificate Secret's and the leader-election Lease's")
}

func TestRBACNamespaceRestricted(t *testing.T) {
	cases := []struct {
		name   string
		values string
		// clusterRole: automatic mode keeps a ClusterRole limited to the own webhook configurations.
		clusterRole bool
	}{
		{name: "automatic", values: `{namespaceRestriction: {enabled: true}, crds: {install: false}}`, clusterRole: true},
		{name: "cert-manager", values: `{namespaceRestriction: {enabled: true}, crds: {install: false}, webhook: {certManager: {enabled: true}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := render(t, "team-a", tc.values)

			role := get[rbacv1.Role](t, o, "Role", "dynamo-operator")
			assert.Equal(t, "team-a", role.Namespace)
			for _, verb := range []string{"get", "create", "update", "patch", "delete"} {
				assert.True(t, allows(role.Rules, "coordination.k8s.io", "leases", verb, "dynamo-operator-ns-lock"), "Role allows %s on its Lease", verb)
			}
			assertDynamoRules(t, role.Rules)
			binding := get[rbacv1.RoleBinding](t, o, "RoleBinding", "dynamo-operator")
			assert.Equal(t, "team-a", binding.Namespace)
			assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "dynamo-operator"}, binding.RoleRef)
			assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "dynamo-operator", Namespace: "team-a"}}, binding.Subjects)

			metricsOnly := []string{"dynamo-operator-team-a-metrics-auth", "dynamo-metrics-reader-team-a"}
			if !tc.clusterRole {
				assert.ElementsMatch(t, metricsOnly, o.names("ClusterRole"), "no cluster-scoped permissions but the metrics authentication")
				assert.Equal(t, []string{"dynamo-operator-team-a-metrics-auth"}, o.names("ClusterRoleBinding"))
				return
			}
			assert.ElementsMatch(t, append(metricsOnly, "dynamo-operator-team-a"), o.names("ClusterRole"), "cluster-scoped names carry the namespace, like the webhook configurations")
			clusterRole := get[rbacv1.ClusterRole](t, o, "ClusterRole", "dynamo-operator-team-a")
			clusterBinding := get[rbacv1.ClusterRoleBinding](t, o, "ClusterRoleBinding", "dynamo-operator-team-a")
			assert.Equal(t, "dynamo-operator-team-a", clusterBinding.RoleRef.Name)
			require.Len(t, clusterRole.Rules, 2, "only the two webhook-configuration rules")
			for _, rule := range clusterRole.Rules {
				assert.Equal(t, []string{"admissionregistration.k8s.io"}, rule.APIGroups)
				assert.NotEmpty(t, rule.ResourceNames, "rule %v is limited by resourceNames", rule)
			}
			assert.True(t, allows(clusterRole.Rules, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "patch", "dynamo-validating-team-a"))
			assert.True(t, allows(clusterRole.Rules, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "patch", "dynamo-mutating-team-a"))
			assert.False(t, allows(clusterRole.Rules, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "patch", "dynamo-validating"), "not the cluster-wide release's configuration")
			for _, verb := range []string{"get", "list", "watch", "create"} {
				assert.False(t, allows(clusterRole.Rules, "coordination.k8s.io", "leases", verb, ""), "no cluster-scoped lease permission (%s)", verb)
			}
		})
	}
}

// /metrics is served to bearer tokens the API server authenticates and authorizes: the
// operator may create TokenReviews and SubjectAccessReviews (nothing else, in any topology),
// and <release>-metrics-reader is what a scraper is bound to.
func TestRBACMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, namespace, values, auth, reader string
	}{
		{"cluster-wide", "platform-system", "", "dynamo-operator-metrics-auth", "dynamo-metrics-reader"},
		{"restricted", "team-a", `{namespaceRestriction: {enabled: true}, crds: {install: false}}`, "dynamo-operator-team-a-metrics-auth", "dynamo-metrics-reader-team-a"},
		{"restricted, cert-manager", "team-a", `{namespaceRestriction: {enabled: true}, crds: {install: false}, webhook: {certManager: {enabled: true}}}`,
			"dynamo-operator-team-a-metrics-auth", "dynamo-metrics-reader-team-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := render(t, tc.namespace, tc.values)
			auth := get[rbacv1.ClusterRole](t, o, "ClusterRole", tc.auth)
			assert.Equal(t, []rbacv1.PolicyRule{
				{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
				{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
			}, auth.Rules)
			binding := get[rbacv1.ClusterRoleBinding](t, o, "ClusterRoleBinding", tc.auth)
			assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: tc.auth}, binding.RoleRef)
			assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "dynamo-operator", Namespace: tc.namespace}}, binding.Subjects)

			reader := get[rbacv1.ClusterRole](t, o, "ClusterRole", tc.reader)
			assert.Equal(t, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, reader.Rules)
			assert.Nil(t, o.find("ClusterRoleBinding", tc.reader), "the chart binds the reader to nobody: that is the user's choice")
		})
	}
}

// TestRBACCertificateSecretByName: the operator reads, watches and writes one Secret, by name;
// create is the one verb RBAC cannot limit by name, and nothing lists Secrets (issue 15,
// finding 7).
func TestRBACCertificateSecretByName(t *testing.T) {
	for _, tc := range []struct{ name, values, secret string }{
		{"default name", "", "webhook-server-cert"},
		{"webhook.certificateSecret.name", `{webhook: {certificateSecret: {name: my-tls}}}`, "my-tls"},
		{"restricted", `{namespaceRestriction: {enabled: true}, crds: {install: false}}`, "webhook-server-cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := render(t, "platform-system", tc.values)
			certs := get[rbacv1.Role](t, o, "Role", "dynamo-operator-certs")
			for _, verb := range []string{"get", "watch", "update", "patch"} {
				assert.True(t, allows(certs.Rules, "", "secrets", verb, tc.secret), "%s Secret %s", verb, tc.secret)
				assert.False(t, allows(certs.Rules, "", "secrets", verb, "another-secret"), "%s any other Secret", verb)
				assert.False(t, allows(certs.Rules, "", "secrets", verb, ""), "%s every Secret", verb)
			}
			assert.True(t, allows(certs.Rules, "", "secrets", "create", ""), "create the Secret (RBAC cannot limit create by name)")
			assert.False(t, allows(certs.Rules, "", "secrets", "list", ""), "nothing lists Secrets")
			assert.False(t, allows(certs.Rules, "", "secrets", "delete", tc.secret), "the operator never deletes its Secret")
			for _, r := range certs.Rules {
				if slices.Contains(r.Verbs, "create") {
					assert.Equal(t, []string{"create"}, r.Verbs, "create stands alone in its rule, the one rule without resourceNames")
				} else {
					assert.Equal(t, []string{tc.secret}, r.ResourceNames, "rule %v", r)
				}
			}
		})
	}
}

// TestRBACLeaderElection: every release may hold its leader-election Lease
// (<release>-operator-leader) in the release namespace — by name, create aside — and nothing more
// about Leases comes with it: a restricted release still has no lease permission outside its
// namespace (scenario M8) and its namespace lock (dynamo-operator-ns-lock) is another rule.
func TestRBACLeaderElection(t *testing.T) {
	for _, tc := range []struct{ name, namespace, values string }{
		{"cluster-wide", "platform-system", ""},
		{"restricted", "team-a", `{namespaceRestriction: {enabled: true}, crds: {install: false}}`},
		{"restricted to another namespace", "team-a-system", `{namespaceRestriction: {enabled: true, namespace: team-a}, crds: {install: false}}`},
		{"cert-manager", "platform-system", `{webhook: {certManager: {enabled: true}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := render(t, tc.namespace, tc.values)
			assert.Contains(t, operatorArgs(t, o), "--leader-election-id=dynamo-operator-leader")
			role := get[rbacv1.Role](t, o, "Role", "dynamo-operator-leader-election")
			assert.Equal(t, tc.namespace, role.Namespace, "the Lease lives in the release namespace")
			for _, verb := range []string{"get", "update", "patch"} {
				assert.True(t, allows(role.Rules, "coordination.k8s.io", "leases", verb, "dynamo-operator-leader"), "%s the leader Lease", verb)
				assert.False(t, allows(role.Rules, "coordination.k8s.io", "leases", verb, "dynamo-operator-ns-lock"), "%s the namespace lock is not this Role's", verb)
			}
			assert.True(t, allows(role.Rules, "coordination.k8s.io", "leases", "create", ""))
			for _, verb := range []string{"list", "watch", "delete"} {
				assert.False(t, allows(role.Rules, "coordination.k8s.io", "leases", verb, ""), "%s Leases", verb)
			}
			binding := get[rbacv1.RoleBinding](t, o, "RoleBinding", "dynamo-operator-leader-election")
			assert.Equal(t, tc.namespace, binding.Namespace)
			assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "dynamo-operator-leader-election"}, binding.RoleRef)
			assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "dynamo-operator", Namespace: tc.namespace}}, binding.Subjects)
		})
	}
}

// assertNoSecretAccess: no Role or ClusterRole of the rendering grants any verb on Secrets.
func assertNoSecretAccess(t *testing.T, o objects) {
	t.Helper()
	for _, name := range o.names("Role") {
		role := get[rbacv1.Role](t, o, "Role", name)
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
			assert.False(t, allows(role.Rules, "", "secrets", verb, "webhook-server-cert"), "Role %s allows %s secrets", name, verb)
		}
	}
	for _, name := range o.names("ClusterRole") {
		role := get[rbacv1.ClusterRole](t, o, "ClusterRole", name)
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
			assert.False(t, allows(role.Rules, "", "secrets", verb, "webhook-server-cert"), "ClusterRole %s allows %s secrets", name, verb)
		}
	}
}
