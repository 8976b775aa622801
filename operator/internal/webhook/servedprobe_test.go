package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook/validation"
)

// A served probe is answered with the Service's warning only when it is one: a dry-run create
// labelled ProbeLabel. Everything else keeps the rules' own warnings, and the rules still judge
// the probe.
func TestProbeAnsweringValidator(t *testing.T) {
	service := types.NamespacedName{Namespace: "team-a-system", Name: "dynamo-webhook-service"}
	v := ProbeAnsweringValidator(service, validation.GraphDeployment())
	probe := func(g *v1alpha1.DynamoGraphDeployment) { g.Labels = map[string]string{ProbeLabel: "served"} }
	request := func(dryRun bool) context.Context {
		return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "uid-1", Namespace: "team-a", Operation: admissionv1.Create, DryRun: ptr.To(dryRun),
			Kind: metav1.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "DynamoGraphDeployment"},
		}})
	}

	t.Run("a dry-run create labelled as a probe gets the Service's warning", func(t *testing.T) {
		warnings, err := v.ValidateCreate(request(true), graph("team-a", probe))
		require.NoError(t, err)
		assert.Equal(t, admission.Warnings{ProbeWarning(service)}, warnings)
		assert.Contains(t, ProbeWarning(service), "team-a-system/dynamo-webhook-service")
	})
	t.Run("a probe is still judged by the rules", func(t *testing.T) {
		warnings, err := v.ValidateCreate(request(true), graph("team-a", probe, noServices))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.services")
		assert.Equal(t, admission.Warnings{ProbeWarning(service)}, warnings)
	})
	t.Run("a stored create is not answered, even labelled", func(t *testing.T) {
		warnings, err := v.ValidateCreate(request(false), graph("team-a", probe))
		require.NoError(t, err)
		assert.Empty(t, warnings)
	})
	t.Run("a dry run without the label is not answered", func(t *testing.T) {
		warnings, err := v.ValidateCreate(request(true), graph("team-a"))
		require.NoError(t, err)
		assert.Empty(t, warnings)
	})
	t.Run("updates are not answered", func(t *testing.T) {
		warnings, err := v.ValidateUpdate(request(true), graph("team-a", probe), graph("team-a", probe))
		require.NoError(t, err)
		assert.Empty(t, warnings)
	})
	t.Run("an operator that does not know its Service answers nothing", func(t *testing.T) {
		warnings, err := ProbeAnsweringValidator(types.NamespacedName{}, validation.GraphDeployment()).ValidateCreate(request(true), graph("team-a", probe))
		require.NoError(t, err)
		assert.Empty(t, warnings)
	})
}

// ServedProbe.Answered against a stand-in API server: what comes back decides, and a refusal
// says what to grant.
func TestServedProbeAnswered(t *testing.T) {
	service := types.NamespacedName{Namespace: "team-a-system", Name: "dynamo-webhook-service"}
	serve := func(t *testing.T, handler http.HandlerFunc) *ServedProbe {
		t.Helper()
		api := httptest.NewServer(handler)
		t.Cleanup(api.Close)
		p, err := NewServedProbe(&rest.Config{Host: api.URL}, "team-a", service, logr.Discard())
		require.NoError(t, err)
		return p
	}
	created := func(warnings ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			assert.Equal(t, "/apis/nvidia.com/v1alpha1/namespaces/team-a/dynamographdeployments", r.URL.Path)
			assert.Equal(t, metav1.DryRunAll, r.URL.Query().Get("dryRun"), "the probe must be a dry run")
			for _, text := range warnings {
				w.Header().Add("Warning", `299 - "`+text+`"`)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment","metadata":{"name":"dynamo-operator-probe-x","namespace":"team-a"}}`))
		}
	}

	t.Run("its own warning: answered", func(t *testing.T) {
		answered, seen := serve(t, created("another warning", ProbeWarning(service))).Answered(context.Background())
		assert.True(t, answered, seen)
	})
	t.Run("another operator's warning only: not answered, and says what came back", func(t *testing.T) {
		other := ProbeWarning(types.NamespacedName{Namespace: "platform-system", Name: "dynamo-webhook-service"})
		answered, seen := serve(t, created(other)).Answered(context.Background())
		assert.False(t, answered)
		assert.Contains(t, seen, "platform-system/dynamo-webhook-service")
	})
	t.Run("admitted without warnings (the webhook not reached, failurePolicy Ignore): not answered", func(t *testing.T) {
		answered, seen := serve(t, created()).Answered(context.Background())
		assert.False(t, answered)
		assert.Equal(t, "admitted without any warning", seen)
	})
	t.Run("forbidden: not answered, and names the permission to grant", func(t *testing.T) {
		answered, seen := serve(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"dynamographdeployments.nvidia.com is forbidden"}`))
		}).Answered(context.Background())
		assert.False(t, answered)
		assert.Contains(t, seen, "must allow create on dynamographdeployments.nvidia.com")
	})
}
