package doctor

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestCallFailureClassification maps the API server's failed-call texts (the shapes
// cmapichecker documents, for this release's names) to the documented causes. The
// envtest suite checks the same classification against a live API server.
func TestCallFailureClassification(t *testing.T) {
	const post = `Internal error occurred: failed calling webhook "mdynamographdeployment.nvidia.com": failed to call webhook: Post "https://dynamo-webhook-service.dynamo-system.svc:443/mutate-nvidia-com-v1alpha1-dynamographdeployment?timeout=10s": `
	cases := []struct {
		name, text string
		scenario   string
		cause      string
		fix        string
	}{
		{"T8 service not found", post + `service "dynamo-webhook-service" not found`, "T8",
			`calling webhook mdynamographdeployment.nvidia.com: service "dynamo-webhook-service" not found`, "helm upgrade dynamo"},
		{"T6 connection refused", post + `dial tcp 10.96.38.90:443: connect: connection refused`, "T6",
			"connection refused", "kubectl -n dynamo-system describe pods -l app.kubernetes.io/instance=dynamo"},
		{"T6 no endpoints (endpoint routing)", post + `no endpoints available for service "dynamo-webhook-service"`, "T6", "connection refused", ""},
		{"T3 unknown authority", post + `tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because of "crypto/rsa: verification error" while trying to verify candidate authority certificate "dynamo-webhook-service-ca")`,
			"T3", "x509: certificate signed by unknown authority", "rollout restart"},
		{"T4 wrong SAN", post + `tls: failed to verify certificate: x509: certificate is valid for wrong.dynamo-system.svc, not dynamo-webhook-service.dynamo-system.svc`,
			"T4", "x509: certificate is valid for wrong.dynamo-system.svc, not dynamo-webhook-service.dynamo-system.svc", ""},
		{"T5 expired", post + `tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2026-01-02T00:00:00Z is after 2026-01-01T00:00:00Z`,
			"T5", "x509: certificate has expired or is not yet valid", ""},
		{"T9 deadline", post + `context deadline exceeded`, "T9", "context deadline exceeded (slower than its timeoutSeconds)", "--webhook-latency-injection"},
		{"T9 handshake slower than the transport allows", post + `net/http: TLS handshake timeout`, "T9", "context deadline exceeded (slower than its timeoutSeconds)", ""},
		{"T9 client timeout", post + `net/http: request canceled (Client.Timeout exceeded while awaiting headers)`, "T9", "context deadline exceeded", "webhook.timeoutSeconds=30"},
		{"doctor not allowed", `dynamographdeployments.nvidia.com is forbidden: User "jane" cannot create resource "dynamographdeployments" in API group "nvidia.com" in the namespace "team-x"`,
			"", "the doctor's credentials may not create DynamoGraphDeployments in namespace team-x", "kubectl auth can-i create dynamographdeployments.nvidia.com -n team-x"},
		{"CRDs missing", `no matches for kind "DynamoGraphDeployment" in version "nvidia.com/v1alpha1"`, "", "the DynamoGraphDeployment CRD is not installed", "crds.install=true"},
		{"test namespace missing", `namespaces "team-x" not found`, "", "namespace team-x not found", "kubectl create namespace team-x"},
		{"denied by another policy webhook", `admission webhook "validate.kyverno.svc-fail" denied the request: policy require-labels`, "",
			`denied by another admission webhook, "validate.kyverno.svc-fail"`, "kubectl get validatingwebhookconfigurations"},
		{"denied by this release", `admission webhook "vdynamographdeployment.nvidia.com" denied the request: DynamoGraphDeployment.nvidia.com "x" is invalid`, "",
			`denied by this release's webhook "vdynamographdeployment.nvidia.com"`, ""},
		{"another failed call", post + `EOF`, "", "calling webhook mdynamographdeployment.nvidia.com", ""},
		{"anything else", `etcdserver: request timed out`, "", "failed: etcdserver: request timed out", ""},
	}
	r := newRelease(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &session{Doctor: fakeDoctor(t, r, r.objects(t), time.Now()), facts: defaultFacts(Options{Release: "dynamo", Namespace: "dynamo-system", Chart: DefaultChart})}
			withConfigurations(t, s, r)
			c := s.callFailure("the dry-run create", errors.New(tc.text))
			assert.Equal(t, tc.scenario, c.scenario)
			assert.Contains(t, c.text, tc.cause)
			assert.NotEmpty(t, c.fix)
			if tc.fix != "" {
				assert.Contains(t, c.fix, tc.fix)
			}
		})
	}
}
