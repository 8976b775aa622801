package webhook

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook/defaulting"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook/validation"
)

// namespaceSet is an ExclusionChecker over a fixed set of namespaces.
type namespaceSet map[string]bool

func (s namespaceSet) Excluded(ns string) bool { return s[ns] }

// logLines collects a logger's output as decoded JSON lines.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (l *logLines) logger() logr.Logger { return l.loggerAt(0) }

// loggerAt is logger with V(verbosity) lines enabled.
func (l *logLines) loggerAt(verbosity int) logr.Logger {
	return funcr.NewJSON(func(obj string) {
		var line map[string]any
		if err := json.Unmarshal([]byte(obj), &line); err != nil {
			panic(err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, line)
	}, funcr.Options{Verbosity: verbosity})
}

// find returns the lines whose "msg" is msg.
func (l *logLines) find(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range l.lines {
		if line["msg"] == msg {
			out = append(out, line)
		}
	}
	return out
}

// requests and denials read counters, whose values are whole numbers: compared as ints, exactly.
func requests(webhook string, op admissionv1.Operation, result string) int {
	return int(testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues(webhook, string(op), result)))
}

func denials(webhook, reason string) int {
	return int(testutil.ToFloat64(metrics.WebhookDenials.WithLabelValues(webhook, reason)))
}

func durationSamples(t *testing.T, webhook string, op admissionv1.Operation, result string) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, metrics.WebhookDuration.WithLabelValues(webhook, string(op), result).(prometheus.Histogram).Write(&m))
	return m.GetHistogram().GetSampleCount()
}

func graph(ns string, mutate ...func(*v1alpha1.DynamoGraphDeployment)) *v1alpha1.DynamoGraphDeployment {
	g := &v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-graph"},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{
			BackendFramework: "vllm",
			Services:         map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"decode": {}},
		},
	}
	for _, m := range mutate {
		m(g)
	}
	return g
}

func noServices(g *v1alpha1.DynamoGraphDeployment) { g.Spec.Services = nil }

func createRequest(ns string) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid-1", Namespace: ns, Operation: admissionv1.Create,
		Kind: metav1.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "DynamoGraphDeployment"},
	}})
}

// createRequestOf is createRequest in obj's namespace, carrying obj as the API server sends it.
func createRequestOf(t *testing.T, obj client.Object) context.Context {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	req, err := admission.RequestFromContext(createRequest(obj.GetNamespace()))
	require.NoError(t, err)
	req.Object = runtime.RawExtension{Raw: raw}
	return admission.NewContextWithRequest(context.Background(), req)
}

func TestLeaseAware(t *testing.T) {
	const hook = "validate-test-leaseaware"
	logs := &logLines{}
	log := logs.logger()
	v := ObservedValidator(hook, "DynamoGraphDeployment", log,
		LeaseAwareValidator(namespaceSet{"team-a": true}, log, validation.GraphDeployment()))

	t.Run("M2/excluded namespace: invalid object admitted unchecked and recorded as skipped", func(t *testing.T) {
		warnings, err := v.ValidateCreate(createRequest("team-a"), graph("team-a", noServices))
		require.NoError(t, err)
		assert.Empty(t, warnings)
		assert.Equal(t, 1, requests(hook, admissionv1.Create, metrics.ResultSkipped))
		assert.Equal(t, 0, requests(hook, admissionv1.Create, metrics.ResultDenied))
		assert.EqualValues(t, 1, durationSamples(t, hook, admissionv1.Create, metrics.ResultSkipped))

		skips := logs.find("Skipping admission: a namespace-restricted operator's Lease is active in this namespace")
		require.Len(t, skips, 1)
		assert.Equal(t, "team-a", skips[0]["namespace"])
		assert.Equal(t, "DynamoGraphDeployment", skips[0]["kind"])
		lines := logs.find("validate create")
		require.Len(t, lines, 1)
		assert.Equal(t, metrics.ResultSkipped, lines[0]["result"])
		assert.Contains(t, lines[0]["skipReason"], "Lease is active in namespace team-a")
	})

	t.Run("M2/other namespace: validated and denied", func(t *testing.T) {
		_, err := v.ValidateCreate(createRequest("team-b"), graph("team-b", noServices))
		require.Error(t, err)
		assert.Equal(t, 1, requests(hook, admissionv1.Create, metrics.ResultDenied))
		assert.Equal(t, 1, requests(hook, admissionv1.Create, metrics.ResultSkipped), "skipped count unchanged")
	})

	t.Run("M2/updates and deletes are skipped too", func(t *testing.T) {
		_, err := v.ValidateUpdate(context.Background(), graph("team-a"), graph("team-a", func(g *v1alpha1.DynamoGraphDeployment) {
			g.Spec.BackendFramework = "sglang"
		}))
		require.NoError(t, err)
		assert.Equal(t, 1, requests(hook, admissionv1.Update, metrics.ResultSkipped))
		_, err = v.ValidateDelete(context.Background(), graph("team-a"))
		require.NoError(t, err)
		assert.Equal(t, 1, requests(hook, admissionv1.Delete, metrics.ResultSkipped))
	})

	t.Run("M2/namespace taken from the request when the object has none", func(t *testing.T) {
		_, err := v.ValidateCreate(createRequest("team-a"), graph("", noServices))
		require.NoError(t, err)
		assert.Equal(t, 2, requests(hook, admissionv1.Create, metrics.ResultSkipped))
	})

	t.Run("M7/excluded namespace: no patch", func(t *testing.T) {
		assertNoPatchInExcludedNamespace(t, "mutate-test-leaseaware",
			Patcher[*v1alpha1.DynamoGraphDeployment](defaulting.GraphDeployment{OperatorVersion: "v9"}), graph("team-a"), graph("team-b"),
			jsonpatch.NewOperation("add", "/metadata/annotations", map[string]string{v1alpha1.OperatorOriginVersionAnnotation: "v9"}))
		assertNoPatchInExcludedNamespace(t, "mutate-test-leaseaware-request",
			Patcher[*v1beta1.DynamoGraphDeploymentRequest](defaulting.GraphDeploymentRequest{Image: "img"}), profileRequest("team-a"), profileRequest("team-b"),
			jsonpatch.NewOperation("add", "/spec/image", "img"))
	})

	t.Run("M2/nil exclusions skip nothing", func(t *testing.T) {
		_, err := LeaseAwareValidator(nil, log, validation.GraphDeployment()).
			ValidateCreate(createRequest("team-a"), graph("team-a", noServices))
		require.Error(t, err)
		patch, err := LeaseAwarePatcher(nil, log, Patcher[*v1alpha1.DynamoGraphDeployment](defaulting.GraphDeployment{OperatorVersion: "v9"})).
			Patch(createRequest("team-a"), graph("team-a"))
		require.NoError(t, err)
		assert.Len(t, patch, 1)
		patch, err = LeaseAwarePatcher(nil, log, Patcher[*v1beta1.DynamoGraphDeploymentRequest](defaulting.GraphDeploymentRequest{Image: "img"})).
			Patch(createRequestOf(t, profileRequest("team-a")), profileRequest("team-a"))
		require.NoError(t, err)
		assert.Equal(t, []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/spec/image", "img")}, patch)
	})
}

// profileRequest is a DynamoGraphDeploymentRequest in ns without an image.
func profileRequest(ns string) *v1beta1.DynamoGraphDeploymentRequest {
	return &v1beta1.DynamoGraphDeploymentRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"},
		Spec:       v1beta1.DynamoGraphDeploymentRequestSpec{Model: "m"},
	}
}

// assertNoPatchInExcludedNamespace checks rule composed as registerPatcher composes it, with
// team-a excluded: inTeamA is skipped, unpatched, and inTeamB gets the one operation want,
// each counted and logged as such under hook.
func assertNoPatchInExcludedNamespace[T client.Object](t *testing.T, hook string, rule Patcher[T], inTeamA, inTeamB T, want jsonpatch.JsonPatchOperation) {
	t.Helper()
	logs := &logLines{}
	log := logs.logger()
	p := ObservedPatcher(hook, reflect.TypeOf(inTeamA).Elem().Name(), log, LeaseAwarePatcher(namespaceSet{"team-a": true}, log, rule))

	patch, err := p.Patch(createRequest("team-a"), inTeamA)
	require.NoError(t, err)
	assert.Empty(t, patch)
	assert.Equal(t, 1, requests(hook, admissionv1.Create, metrics.ResultSkipped))

	patch, err = p.Patch(createRequestOf(t, inTeamB), inTeamB)
	require.NoError(t, err)
	assert.Equal(t, []jsonpatch.JsonPatchOperation{want}, patch)
	assert.Equal(t, 1, requests(hook, admissionv1.Create, metrics.ResultAllowed))
	lines := logs.find("default")
	require.Len(t, lines, 2)
	assert.Equal(t, metrics.ResultSkipped, lines[0]["result"])
	assert.Equal(t, metrics.ResultAllowed, lines[1]["result"])
}

func TestObserved(t *testing.T) {
	logs := &logLines{}
	log := logs.logger()

	t.Run("A9/denial logged with kind name namespace result and reasons", func(t *testing.T) {
		const hook = "validate-test-observed-denial"
		v := ObservedValidator(hook, "DynamoGraphDeployment", log, validation.GraphDeployment())
		_, err := v.ValidateUpdate(context.Background(), graph("team-a"), graph("team-a", func(g *v1alpha1.DynamoGraphDeployment) {
			g.Spec.BackendFramework = "sglang"
			g.Spec.Restart = &v1alpha1.Restart{}
			g.Spec.PVCs = []v1alpha1.PVC{{Create: ptr.To(true)}}
		}))
		require.Error(t, err)

		assert.Equal(t, 1, requests(hook, admissionv1.Update, metrics.ResultDenied))
		assert.EqualValues(t, 1, durationSamples(t, hook, admissionv1.Update, metrics.ResultDenied))
		// Five required causes and one immutable: each reason counts once per denial.
		assert.Equal(t, 1, denials(hook, ReasonRequired))
		assert.Equal(t, 1, denials(hook, ReasonImmutable))
		assert.Equal(t, 0, denials(hook, ReasonInvalid), "immutable must not be counted as invalid")

		lines := logs.find("validate update")
		require.Len(t, lines, 1)
		assert.Equal(t, "DynamoGraphDeployment", lines[0]["kind"])
		assert.Equal(t, "my-graph", lines[0]["name"])
		assert.Equal(t, "team-a", lines[0]["namespace"])
		assert.Equal(t, metrics.ResultDenied, lines[0]["result"])
		assert.ElementsMatch(t, []any{ReasonRequired, ReasonImmutable}, lines[0]["reasons"])
		assert.Contains(t, lines[0]["message"], "DynamoGraphDeployment team-a/my-graph is invalid: ")
	})

	t.Run("A1/warnings pass through and are logged", func(t *testing.T) {
		const hook = "validate-test-observed-warnings"
		v := ObservedValidator(hook, "DynamoComponentDeployment", log, validation.ComponentDeployment())
		dcd := &v1alpha1.DynamoComponentDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "decode"}}
		dcd.Spec.DynamoNamespace = ptr.To("legacy")
		warnings, err := v.ValidateCreate(context.Background(), dcd)
		require.NoError(t, err)
		require.Len(t, warnings, 1)
		assert.Contains(t, warnings[0], "spec.dynamoNamespace is deprecated")
		assert.Equal(t, 1, requests(hook, admissionv1.Create, metrics.ResultAllowed))

		lines := logs.find("validate create")
		require.NotEmpty(t, lines)
		last := lines[len(lines)-1]
		assert.Equal(t, "decode", last["name"])
		assert.Equal(t, metrics.ResultAllowed, last["result"])
		assert.Len(t, last["warnings"], 1)
	})

	t.Run("internal failures are errors, not denials", func(t *testing.T) {
		const hook = "mutate-test-observed-error"
		// Without an admission request the rule cannot tell create from update.
		p := ObservedPatcher(hook, "DynamoGraphDeployment", log,
			Patcher[*v1alpha1.DynamoGraphDeployment](defaulting.GraphDeployment{OperatorVersion: "v9"}))
		_, err := p.Patch(context.Background(), graph("team-a"))
		require.Error(t, err)
		assert.Equal(t, 1, requests(hook, "", metrics.ResultError), "no request, no operation")
		lines := logs.find("default")
		require.NotEmpty(t, lines)
		last := lines[len(lines)-1]
		assert.Equal(t, metrics.ResultError, last["result"])
		assert.NotEmpty(t, last["error"])
	})
}

func TestDenialReasons(t *testing.T) {
	cases := []struct {
		name   string
		status metav1.Status
		want   []string
	}{
		{
			name: "A9/every field error type has its own reason",
			status: metav1.Status{Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
				{Type: metav1.CauseTypeFieldValueRequired}, {Type: metav1.CauseTypeFieldValueInvalid},
				{Type: validation.CauseTypeFieldValueImmutable}, {Type: "FieldValueForbidden"},
				{Type: metav1.CauseTypeFieldValueDuplicate}, {Type: "FieldValueTooLong"},
				{Type: metav1.CauseTypeFieldValueNotSupported}, {Type: metav1.CauseTypeFieldValueNotFound},
				{Type: "FieldValueTooMany"}, {Type: "FieldValueTooShort"}, {Type: "FieldValueTooFew"},
				{Type: "FieldValueTypeInvalid"}, {Type: "InternalError"},
			}}},
			want: []string{ReasonRequired, ReasonInvalid, ReasonImmutable, ReasonForbidden, ReasonDuplicate, ReasonTooLong,
				ReasonNotSupported, ReasonNotFound, ReasonTooMany, ReasonTooShort, ReasonTooFew, ReasonTypeInvalid, ReasonInternal},
		},
		{
			name: "A9/repeated types count once",
			status: metav1.Status{Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
				{Type: metav1.CauseTypeFieldValueRequired}, {Type: metav1.CauseTypeFieldValueRequired},
			}}},
			want: []string{ReasonRequired},
		},
		{
			name:   "A9/unknown cause type",
			status: metav1.Status{Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "Surprise"}}}},
			want:   []string{ReasonOther},
		},
		{name: "A9/no causes", status: metav1.Status{Message: "denied"}, want: []string{ReasonUnspecified}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, denialReasons(tc.status))
		})
	}
}

func TestMarkSkippedWithoutObserved(t *testing.T) {
	// LeaseAware may run without Observed (e.g. in a test); marking must then be harmless.
	assert.NotPanics(t, func() { markSkipped(context.Background(), "reason") })
}
