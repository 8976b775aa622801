package webhook

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
)

// The mutating webhooks end to end, through the served handler: what they add (A7), what they
// leave alone, and how they refuse an object that does not decode (H2 sends some of these to
// every admission path).

const (
	mutateDGDPath  = "/mutate-nvidia-com-v1alpha1-dynamographdeployment"
	mutateDGDRPath = "/mutate-nvidia-com-v1beta1-dynamographdeploymentrequest"
)

// rawKind is a kind whose AdmissionReviews the tests in this file write as raw JSON, so that
// they can send what the Go types cannot encode.
type rawKind struct {
	gvk      metav1.GroupVersionKind
	resource string
	// name is the object's name in every review's request.
	name string
}

var (
	dgdKind  = rawKind{gvk: gvkDGD, resource: "dynamographdeployments", name: "g"}
	dgdrKind = rawKind{gvk: gvkDGDR, resource: "dynamographdeploymentrequests", name: "r"}
)

// review is an AdmissionReview of op on an object of kind k in namespace team-a: object and
// old are the raw JSON of request.object and request.oldObject ("" leaves one out).
func (k rawKind) review(op admissionv1.Operation, object, old string) []byte {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",` +
		`"kind":{"group":"` + k.gvk.Group + `","version":"` + k.gvk.Version + `","kind":"` + k.gvk.Kind + `"},` +
		`"resource":{"group":"` + k.gvk.Group + `","version":"` + k.gvk.Version + `","resource":"` + k.resource + `"},` +
		`"name":"` + k.name + `","namespace":"team-a","operation":"` + string(op) + `"`)
	if object != "" {
		b.WriteString(`,"object":` + object)
	}
	if old != "" {
		b.WriteString(`,"oldObject":` + old)
	}
	b.WriteString(`,"userInfo":{"username":"alice"}}}`)
	return []byte(b.String())
}

// apiServerDGD is a DynamoGraphDeployment as the API server hands it to admission on create
// (uid, creationTimestamp, generation and managedFields set), with metadata extended by
// extraMetadata (`,"annotations":{…}`, say).
func apiServerDGD(extraMetadata string) string {
	return `{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment","metadata":{"name":"g","namespace":"team-a",` +
		`"uid":"0b7c9d3e-2a41-4e8f-b6d5-000000000001","creationTimestamp":"2026-07-01T10:00:00Z","generation":1,` +
		`"managedFields":[{"apiVersion":"nvidia.com/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:backendFramework":{}}},` +
		`"manager":"kubectl","operation":"Update","time":"2026-07-01T10:00:00Z"}]` + extraMetadata + `},` +
		`"spec":{"backendFramework":"vllm","services":{"frontend":{"replicas":1}}}}`
}

// dgdWith is a DynamoGraphDeployment whose metadata and spec are given as raw JSON ("" leaves
// one out).
func dgdWith(metadata, spec string) string {
	return jsonObject(`"apiVersion":"nvidia.com/v1alpha1"`, `"kind":"DynamoGraphDeployment"`,
		member("metadata", metadata), member("spec", spec))
}

// jsonObject is the JSON object of members (`"name":value`), leaving out those that are "".
func jsonObject(members ...string) string {
	return "{" + strings.Join(slices.DeleteFunc(members, func(m string) bool { return m == "" }), ",") + "}"
}

// member is the object member name with the raw JSON value, or "" when value is "".
func member(name, value string) string {
	if value == "" {
		return ""
	}
	return `"` + name + `":` + value
}

const validSpec = `{"backendFramework":"vllm","services":{"frontend":{"replicas":1}}}`

// patched is object with the answer's JSON patch applied as the API server applies a mutating
// webhook's patch, then read as the API server keeps it (asStored).
func patched[T any](t *testing.T, object string, resp *admissionv1.AdmissionResponse) *T {
	t.Helper()
	out := []byte(object)
	if len(resp.Patch) > 0 {
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		require.NoError(t, err, "patch %s", resp.Patch)
		out, err = patch.Apply(out)
		require.NoError(t, err, "applying patch %s to %s", resp.Patch, object)
	}
	return asStored[T](t, out)
}

// asStored is object as the API server keeps it: decoded into its kind's type T (unknown
// fields pruned, null as absent) and without status, which a kind with a status subresource
// takes only through that subresource (dropped on create, the old one kept on update).
func asStored[T any](t *testing.T, object []byte) *T {
	t.Helper()
	var obj T
	require.NoError(t, json.Unmarshal(object, &obj), "%s", object)
	reflect.ValueOf(&obj).Elem().FieldByName("Status").SetZero()
	return &obj
}

// answered posts body to path and requires an answer to the request u-1, with a status, that
// admits it or not as allowed says.
func answered(t *testing.T, mux http.Handler, path string, body []byte, allowed bool) *admissionv1.AdmissionResponse {
	t.Helper()
	rec, out := post(t, mux, path, body)
	require.Equal(t, http.StatusOK, rec.Code)
	resp := out.Response
	require.NotNil(t, resp)
	assert.Equal(t, types.UID("u-1"), resp.UID)
	require.Equal(t, allowed, resp.Allowed, "%+v", resp.Result)
	require.NotNil(t, resp.Result)
	return resp
}

// admitted posts body to path and requires the answer to admit the request u-1 with status
// 200; it returns the answer.
func admitted(t *testing.T, mux http.Handler, path string, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	resp := answered(t, mux, path, body, true)
	assert.EqualValues(t, http.StatusOK, resp.Result.Code)
	return resp
}

// refused posts body to path and requires the answer to refuse the request u-1, unpatched; it
// returns the answer's status.
func refused(t *testing.T, mux http.Handler, path string, body []byte) *metav1.Status {
	t.Helper()
	resp := answered(t, mux, path, body, false)
	assert.Nil(t, resp.PatchType)
	return resp.Result
}

// assertUnpatched asserts that an answer carries no patch.
func assertUnpatched(t *testing.T, resp *admissionv1.AdmissionResponse) {
	t.Helper()
	assert.Nil(t, resp.PatchType)
	assert.Empty(t, resp.Patch)
}

// assertPatchedOnce asserts that resp carries a JSON patch (exactly want, unless want is "")
// and that the webhook leaves its own output, stored, as it is when the API server reinvokes
// it with the same request.
func assertPatchedOnce(t *testing.T, mux http.Handler, path string, k rawKind, op admissionv1.Operation, stored any, old, want string, resp *admissionv1.AdmissionResponse) {
	t.Helper()
	require.NotNil(t, resp.PatchType)
	assert.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
	if want != "" {
		assert.JSONEq(t, want, string(resp.Patch))
	}
	once, err := json.Marshal(stored)
	require.NoError(t, err)
	_, again := post(t, mux, path, k.review(op, string(once), old))
	require.NotNil(t, again.Response)
	require.True(t, again.Response.Allowed, "%+v", again.Response.Result)
	assert.Empty(t, again.Response.Patch, "a second pass patched %s", once)
}

// undecodable is an object the mutating webhook of a kind cannot decode, and the message of
// its 400.
type undecodable struct {
	name, object, want string
}

// assertRefusesWhatDoesNotDecode posts each object to path on CREATE, UPDATE (with old) and
// CONNECT and asserts the 400 with its message, and on DELETE an admission without a look.
func assertRefusesWhatDoesNotDecode(t *testing.T, mux http.Handler, path string, k rawKind, old string, cases []undecodable) {
	for _, tc := range cases {
		for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Connect} {
			t.Run(tc.name+"/"+string(op), func(t *testing.T) {
				oldObject := ""
				if op == admissionv1.Update {
					oldObject = old
				}
				status := refused(t, mux, path, k.review(op, tc.object, oldObject))
				assert.EqualValues(t, http.StatusBadRequest, status.Code)
				assert.Equal(t, tc.want, status.Message)
				assert.Empty(t, status.Reason)
			})
		}
		t.Run(tc.name+"/DELETE", func(t *testing.T) {
			assertUnpatched(t, admitted(t, mux, path, k.review(admissionv1.Delete, tc.object, tc.object)))
		})
	}
}

// undecodable are the objects no kind's webhook decodes: not an object, none at all, another
// kind, or a version the scheme does not know.
func (k rawKind) undecodable() []undecodable {
	const notAnObject = `couldn't get version/kind; json parse error: json: cannot unmarshal %s into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }`
	into := "*" + k.gvk.Version + "." + k.gvk.Kind // the Go type, as the decoder names it
	return []undecodable{
		{"H2/object a string", `"text"`, strings.Replace(notAnObject, "%s", "string", 1)},
		{"H2/object a number", `7`, strings.Replace(notAnObject, "%s", "number", 1)},
		{"H2/object an array", `[]`, strings.Replace(notAnObject, "%s", "array", 1)},
		{"H2/object null", `null`, "there is no content to decode"},
		{"H2/no object", ``, "there is no content to decode"},
		{"H2/a Pod", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"team-a"}}`,
			"unable to decode /v1, Kind=Pod into " + into},
		{"H2/an unknown version", `{"apiVersion":"nvidia.com/v9","kind":"` + k.gvk.Kind + `","metadata":{"name":"` + k.name + `"}}`,
			`no kind "` + k.gvk.Kind + `" is registered for version "nvidia.com/v9" in scheme "pkg/runtime/scheme.go:111"`},
	}
}

// The two shapes of the stamping patch: the annotations map with the one entry, or the entry
// (its key's "/" escaped as "~1").
const (
	addAnnotations   = `[{"op":"add","path":"/metadata/annotations","value":{"nvidia.com/dynamo-operator-origin-version":"` + testOperatorVersion + `"}}]`
	addOriginVersion = `[{"op":"add","path":"/metadata/annotations/nvidia.com~1dynamo-operator-origin-version","value":"` + testOperatorVersion + `"}]`
)

func TestMutatingGraphDeploymentStampsTheOriginVersion(t *testing.T) {
	const key = v1alpha1.OperatorOriginVersionAnnotation
	mux := servedMux(t)
	stamped := map[string]string{key: testOperatorVersion}
	cases := []struct {
		name   string
		object string
		// want is the object's annotations once the patch is applied; nil: no patch at all.
		want map[string]string
		// patch, if given, is the patch exactly: one operation.
		patch string
	}{
		{name: "A7/no annotations", object: apiServerDGD(""), want: stamped, patch: addAnnotations},
		{name: "A7/other annotations are kept", object: apiServerDGD(`,"annotations":{"team":"a"}`), want: map[string]string{"team": "a", key: testOperatorVersion}, patch: addOriginVersion},
		{name: "A7/empty annotations", object: apiServerDGD(`,"annotations":{}`), want: stamped, patch: addOriginVersion},
		{name: "A7/annotations null", object: apiServerDGD(`,"annotations":null`), want: stamped, patch: addAnnotations},
		{name: "A7/an origin version present is kept", object: apiServerDGD(`,"annotations":{"` + key + `":"v0.0.1-user"}`)},
		{name: "A7/an empty origin version present is kept", object: apiServerDGD(`,"annotations":{"` + key + `":""}`)},
		{name: "A7/unknown fields are left to the API server's pruning", object: `{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment","extra":1,` +
			`"metadata":{"name":"g","extra":2},"spec":{"backendFramework":"vllm","x":3,"services":{"frontend":{"replicas":1,"y":4}}}}`, want: stamped},
		{name: "A7/without metadata", object: dgdWith("", validSpec), want: stamped},
		{name: "A7/metadata null", object: dgdWith("null", validSpec), want: stamped},
		{name: "A7/metadata empty", object: dgdWith("{}", validSpec), want: stamped},
		{name: "A7/without spec", object: dgdWith(`{"name":"g"}`, ""), want: stamped},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := admitted(t, mux, mutateDGDPath, dgdKind.review(admissionv1.Create, tc.object, ""))
			if tc.want == nil {
				assertUnpatched(t, resp)
				return
			}
			got := patched[v1alpha1.DynamoGraphDeployment](t, tc.object, resp)
			want := asStored[v1alpha1.DynamoGraphDeployment](t, []byte(tc.object))
			want.Annotations = tc.want
			assert.Equal(t, want, got, "the object as stored after the patch %s", resp.Patch)
			assertPatchedOnce(t, mux, mutateDGDPath, dgdKind, admissionv1.Create, got, "", tc.patch, resp)
		})
	}

	for _, tc := range []struct {
		op          admissionv1.Operation
		object, old string
	}{
		{admissionv1.Update, apiServerDGD(""), apiServerDGD("")},
		{admissionv1.Delete, "", apiServerDGD("")},
		{admissionv1.Connect, apiServerDGD(""), ""},
	} {
		t.Run("A7/"+string(tc.op)+" is never patched", func(t *testing.T) {
			assertUnpatched(t, admitted(t, mux, mutateDGDPath, dgdKind.review(tc.op, tc.object, tc.old)))
		})
	}

	t.Run("A7/no operator version stamps nothing", func(t *testing.T) {
		assertUnpatched(t, admitted(t, servedMuxWith(t, Config{}), mutateDGDPath, dgdKind.review(admissionv1.Create, apiServerDGD(""), "")))
	})
}

// The mutating webhook is composed with Observed and LeaseAware: a create is logged and
// counted, and in a namespace a restricted operator owns it is skipped, unpatched.
func TestMutatingGraphDeploymentIsObservedAndLeaseAware(t *testing.T) {
	const hook = "mutate-dynamographdeployment"
	lines := &logLines{}
	mux := servedMuxLogging(t, Config{OperatorVersion: testOperatorVersion, Exclusions: namespaceSet{"team-a": true}}, lines.logger())

	skipped, allowed := requests(hook, admissionv1.Create, metrics.ResultSkipped), requests(hook, admissionv1.Create, metrics.ResultAllowed)
	_, out := post(t, mux, mutateDGDPath, dgdKind.review(admissionv1.Create, apiServerDGD(""), ""))
	require.True(t, out.Response.Allowed)
	assert.Empty(t, out.Response.Patch, "M7: patched in an excluded namespace")
	assert.Equal(t, skipped+1, requests(hook, admissionv1.Create, metrics.ResultSkipped))

	other := strings.ReplaceAll(apiServerDGD(""), `"namespace":"team-a"`, `"namespace":"team-b"`)
	_, out = post(t, mux, mutateDGDPath, dgdKind.review(admissionv1.Create, other, ""))
	require.True(t, out.Response.Allowed)
	assert.NotEmpty(t, out.Response.Patch)
	assert.Equal(t, allowed+1, requests(hook, admissionv1.Create, metrics.ResultAllowed))

	logged := lines.find("default")
	require.Len(t, logged, 2, "%v", lines.lines)
	assert.Equal(t, metrics.ResultSkipped, logged[0]["result"])
	assert.Equal(t, "team-a", logged[0]["namespace"])
	assert.Equal(t, metrics.ResultAllowed, logged[1]["result"])
	assert.Equal(t, "team-b", logged[1]["namespace"])
	assert.Equal(t, "g", logged[1]["name"])
	assert.Equal(t, "u-1", logged[1]["requestID"])
}

// An object that does not decode as a DynamoGraphDeployment of v1alpha1 is refused with a 400
// saying why, on every operation that carries one; a DELETE is admitted without a look.
func TestMutatingGraphDeploymentRefusesWhatDoesNotDecode(t *testing.T) {
	mux := servedMux(t)
	assertRefusesWhatDoesNotDecode(t, mux, mutateDGDPath, dgdKind, apiServerDGD(""), append(dgdKind.undecodable(), []undecodable{
		{"H2/another Dynamo kind", `{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoModel","metadata":{"name":"p"}}`,
			"unable to decode nvidia.com/v1alpha1, Kind=DynamoModel into *v1alpha1.DynamoGraphDeployment"},
		{"H2/metadata a string", dgdWith(`"x"`, validSpec),
			"json: cannot unmarshal string into Go struct field DynamoGraphDeployment.metadata of type v1.ObjectMeta"},
		{"H2/metadata an array", dgdWith(`[]`, validSpec),
			"json: cannot unmarshal array into Go struct field DynamoGraphDeployment.metadata of type v1.ObjectMeta"},
		{"H2/annotations an array", dgdWith(`{"name":"g","annotations":[]}`, validSpec),
			"json: cannot unmarshal array into Go struct field ObjectMeta.metadata.annotations of type map[string]string"},
		{"H2/an annotation a number", dgdWith(`{"name":"g","annotations":{"team":1}}`, validSpec),
			"json: cannot unmarshal number into Go struct field ObjectMeta.metadata.annotations of type string"},
		{"H2/the origin version a number", dgdWith(`{"name":"g","annotations":{"`+v1alpha1.OperatorOriginVersionAnnotation+`":1}}`, validSpec),
			"json: cannot unmarshal number into Go struct field ObjectMeta.metadata.annotations of type string"},
		{"H2/a wrongly typed spec field", dgdWith(`{"name":"g"}`, `{"services":{"a":{"replicas":"x"}}}`),
			"json: cannot unmarshal string into Go struct field DynamoComponentDeploymentSharedSpec.spec.services.replicas of type int32"},
		{"H2/a fraction for an integer", dgdWith(`{"name":"g"}`, `{"services":{"a":{"replicas":1.5}}}`),
			"json: cannot unmarshal number 1.5 into Go struct field DynamoComponentDeploymentSharedSpec.spec.services.replicas of type int32"},
	}...))
}

// dgdrWith is a DynamoGraphDeploymentRequest as the API server hands it to admission, its spec
// given as raw JSON and its status as the one phase ("" leaves either out).
func dgdrWith(spec string, phase v1beta1.Phase) string {
	status := ""
	if phase != "" {
		status = `{"phase":"` + string(phase) + `"}`
	}
	return jsonObject(`"apiVersion":"nvidia.com/v1beta1"`, `"kind":"DynamoGraphDeploymentRequest"`,
		`"metadata":{"name":"r","namespace":"team-a","uid":"0b7c9d3e-2a41-4e8f-b6d5-000000000002","creationTimestamp":"2026-07-01T10:00:00Z","generation":1}`,
		member("spec", spec), member("status", status))
}

// A request's spec without an image, and the same spec once the webhook has filled it in.
const dgdrSpec = `{"model":"m","backend":"vllm"}`

var dgdrSpecDefaulted = v1beta1.DynamoGraphDeploymentRequestSpec{Model: "m", Backend: v1beta1.BackendVLLM, Image: testDGDRImage}

func TestMutatingGraphDeploymentRequestFillsInTheProfilerImage(t *testing.T) {
	mux := servedMux(t)
	imageOnly := &v1beta1.DynamoGraphDeploymentRequestSpec{Image: testDGDRImage}
	type mutation struct {
		name        string
		op          admissionv1.Operation
		object, old string
		// want is the object's spec once the patch is applied; nil: no patch at all.
		want *v1beta1.DynamoGraphDeploymentRequestSpec
	}
	cases := []mutation{
		{name: "A7/create keeps an image set", op: admissionv1.Create, object: dgdrWith(`{"model":"m","image":"mine:1"}`, "")},
		{name: "A7/create fills in an empty image", op: admissionv1.Create,
			object: dgdrWith(`{"model":"m","backend":"vllm","image":""}`, ""), want: &dgdrSpecDefaulted},
		{name: "A7/create fills in an absent image", op: admissionv1.Create, object: dgdrWith(dgdrSpec, ""), want: &dgdrSpecDefaulted},
		{name: "A7/create of a request without spec", op: admissionv1.Create, object: dgdrWith("", ""), want: imageOnly},
		{name: "A7/create of a request whose spec is null", op: admissionv1.Create, object: dgdrWith("null", ""), want: imageOnly},
		{name: "A7/create of a request whose spec is empty", op: admissionv1.Create, object: dgdrWith("{}", ""), want: imageOnly},
		{name: "A7/create of a spec whose fields all decode as absent", op: admissionv1.Create,
			object: dgdrWith(`{"model":"","autoApply":false,"sla":null}`, ""), want: imageOnly},
		{name: "A7/unknown fields are left to the API server's pruning", op: admissionv1.Create,
			object: `{"apiVersion":"nvidia.com/v1beta1","kind":"DynamoGraphDeploymentRequest","extra":1,"metadata":{"name":"r","extra":2},` +
				`"spec":{"model":"m","backend":"vllm","x":3}}`, want: &dgdrSpecDefaulted},
		{name: "A7/create of a request whose status names a locked phase", op: admissionv1.Create,
			object: dgdrWith(dgdrSpec, v1beta1.PhaseDeployed), want: &dgdrSpecDefaulted},

		{name: "A7/update keeps an image set", op: admissionv1.Update,
			object: dgdrWith(`{"model":"m","image":"mine:1"}`, ""), old: dgdrWith(`{"model":"m","image":"mine:1"}`, "")},
		{name: "A7/update of a request without status", op: admissionv1.Update,
			object: dgdrWith(dgdrSpec, ""), old: dgdrWith(dgdrSpec, ""), want: &dgdrSpecDefaulted},
		{name: "A7/update of a request without spec", op: admissionv1.Update,
			object: dgdrWith("", v1beta1.PhasePending), old: dgdrWith("", v1beta1.PhasePending), want: imageOnly},
		{name: "A7/update of a Pending request", op: admissionv1.Update,
			object: dgdrWith(dgdrSpec, v1beta1.PhasePending), old: dgdrWith(dgdrSpec, v1beta1.PhasePending), want: &dgdrSpecDefaulted},
		{name: "A7/update of a Failed request", op: admissionv1.Update,
			object: dgdrWith(dgdrSpec, v1beta1.PhaseFailed), old: dgdrWith(dgdrSpec, v1beta1.PhaseFailed), want: &dgdrSpecDefaulted},
		{name: "A7/update: the old object's phase decides (old Pending, new Deployed)", op: admissionv1.Update,
			object: dgdrWith(dgdrSpec, v1beta1.PhaseDeployed), old: dgdrWith(dgdrSpec, v1beta1.PhasePending), want: &dgdrSpecDefaulted},
		{name: "A7/update: the old object's phase decides (old Deployed, new Pending)", op: admissionv1.Update,
			object: dgdrWith(dgdrSpec, v1beta1.PhasePending), old: dgdrWith(dgdrSpec, v1beta1.PhaseDeployed)},
	}
	for _, phase := range v1beta1.SpecLockedPhases {
		cases = append(cases, mutation{name: "A7/update of a " + string(phase) + " request leaves the spec alone", op: admissionv1.Update,
			object: dgdrWith(dgdrSpec, phase), old: dgdrWith(dgdrSpec, phase)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := admitted(t, mux, mutateDGDRPath, dgdrKind.review(tc.op, tc.object, tc.old))
			if tc.want == nil {
				assertUnpatched(t, resp)
				return
			}
			got := patched[v1beta1.DynamoGraphDeploymentRequest](t, tc.object, resp)
			want := asStored[v1beta1.DynamoGraphDeploymentRequest](t, []byte(tc.object))
			want.Spec = *tc.want
			assert.Equal(t, want, got, "the object as stored after the patch %s", resp.Patch)
			assertPatchedOnce(t, mux, mutateDGDRPath, dgdrKind, tc.op, got, tc.old, "", resp)
		})
	}

	for _, tc := range []struct{ name, old string }{
		{"without status", dgdrWith(dgdrSpec, "")},
		{"Deployed", dgdrWith(dgdrSpec, v1beta1.PhaseDeployed)},
		{"that does not decode", `"text"`},
	} {
		t.Run("A7/DELETE of a request "+tc.name+" is never patched", func(t *testing.T) {
			assertUnpatched(t, admitted(t, mux, mutateDGDRPath, dgdrKind.review(admissionv1.Delete, "", tc.old)))
		})
	}

	t.Run("A7/no default image leaves requests alone", func(t *testing.T) {
		mux := servedMuxWith(t, Config{OperatorVersion: testOperatorVersion})
		assertUnpatched(t, admitted(t, mux, mutateDGDRPath, dgdrKind.review(admissionv1.Create, dgdrWith(dgdrSpec, ""), "")))
		assertUnpatched(t, admitted(t, mux, mutateDGDRPath, dgdrKind.review(admissionv1.Create, dgdrWith("", ""), "")))
		assertUnpatched(t, admitted(t, mux, mutateDGDRPath,
			dgdrKind.review(admissionv1.Update, dgdrWith(dgdrSpec, v1beta1.PhasePending), dgdrWith(dgdrSpec, v1beta1.PhasePending))))
	})
}

// On update the webhook reads the old object, for its phase, only when it has an image to fill
// in: an old object that does not decode is then a denial saying so, and otherwise unread.
func TestMutatingGraphDeploymentRequestReadsTheOldObjectOnlyWhenItFillsIn(t *testing.T) {
	mux := servedMux(t)
	const denied = "defaulting DynamoGraphDeploymentRequest team-a/r: decoding the old object: "
	for _, tc := range []struct {
		name, old, want string
	}{
		{"H2/the old object a string", `"text"`, denied + "json: cannot unmarshal string into Go value of type v1beta1.DynamoGraphDeploymentRequest"},
		{"H2/no old object", "", denied + "unexpected end of JSON input"},
		{"H2/the old object null", "null", denied + "unexpected end of JSON input"},
		{"H2/the old phase a number", `{"status":{"phase":1}}`,
			denied + "json: cannot unmarshal number into Go struct field DynamoGraphDeploymentRequestStatus.status.phase of type v1beta1.Phase"},
		{"H2/the old spec wrongly typed", `{"spec":{"image":1},"status":{"phase":"Pending"}}`,
			denied + "json: cannot unmarshal number into Go struct field DynamoGraphDeploymentRequestSpec.spec.image of type string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := refused(t, mux, mutateDGDRPath, dgdrKind.review(admissionv1.Update, dgdrWith(dgdrSpec, ""), tc.old))
			assert.EqualValues(t, http.StatusForbidden, status.Code)
			assert.Equal(t, metav1.StatusReasonForbidden, status.Reason)
			assert.Equal(t, tc.want, status.Message)
		})
		t.Run(tc.name+"/with an image set", func(t *testing.T) {
			const chosen = `{"model":"m","image":"mine:1"}`
			assertUnpatched(t, admitted(t, mux, mutateDGDRPath, dgdrKind.review(admissionv1.Update, dgdrWith(chosen, ""), tc.old)))
		})
		t.Run(tc.name+"/without a default image", func(t *testing.T) {
			assertUnpatched(t, admitted(t, servedMuxWith(t, Config{}), mutateDGDRPath, dgdrKind.review(admissionv1.Update, dgdrWith(dgdrSpec, ""), tc.old)))
		})
	}
}

// An object that does not decode as a DynamoGraphDeploymentRequest of v1beta1 is refused with
// a 400 saying why, on every operation that carries one; a DELETE is admitted without a look.
func TestMutatingGraphDeploymentRequestRefusesWhatDoesNotDecode(t *testing.T) {
	assertRefusesWhatDoesNotDecode(t, servedMux(t), mutateDGDRPath, dgdrKind, dgdrWith(dgdrSpec, ""), append(dgdrKind.undecodable(), []undecodable{
		{"H2/the v1alpha1 version", `{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeploymentRequest","metadata":{"name":"r"}}`,
			"unable to decode nvidia.com/v1alpha1, Kind=DynamoGraphDeploymentRequest into *v1beta1.DynamoGraphDeploymentRequest"},
		{"H2/metadata a string", `{"apiVersion":"nvidia.com/v1beta1","kind":"DynamoGraphDeploymentRequest","metadata":"x"}`,
			"json: cannot unmarshal string into Go struct field DynamoGraphDeploymentRequest.metadata of type v1.ObjectMeta"},
		{"H2/spec a string", dgdrWith(`"x"`, ""),
			"json: cannot unmarshal string into Go struct field DynamoGraphDeploymentRequest.spec of type v1beta1.DynamoGraphDeploymentRequestSpec"},
		{"H2/the image a number", dgdrWith(`{"image":1}`, ""),
			"json: cannot unmarshal number into Go struct field DynamoGraphDeploymentRequestSpec.spec.image of type string"},
		{"H2/the phase a number", `{"apiVersion":"nvidia.com/v1beta1","kind":"DynamoGraphDeploymentRequest","metadata":{"name":"r"},"status":{"phase":1}}`,
			"json: cannot unmarshal number into Go struct field DynamoGraphDeploymentRequestStatus.status.phase of type v1beta1.Phase"},
	}...))
}
