package webhook

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
)

// The DynamoGraphDeployment mutating webhook end to end, through the served handler: what it
// stamps (A7), what it leaves alone, and how it refuses an object that does not decode (H2 sends
// some of these to every admission path).

const mutateDGDPath = "/mutate-nvidia-com-v1alpha1-dynamographdeployment"

// dgdReview is an AdmissionReview of op on a DynamoGraphDeployment in namespace team-a:
// object and old are the raw JSON of request.object and request.oldObject ("" leaves one out).
func dgdReview(op admissionv1.Operation, object, old string) []byte {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",` +
		`"kind":{"group":"nvidia.com","version":"v1alpha1","kind":"DynamoGraphDeployment"},` +
		`"resource":{"group":"nvidia.com","version":"v1alpha1","resource":"dynamographdeployments"},` +
		`"name":"g","namespace":"team-a","operation":"` + string(op) + `"`)
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
	fields := []string{`"apiVersion":"nvidia.com/v1alpha1"`, `"kind":"DynamoGraphDeployment"`}
	if metadata != "" {
		fields = append(fields, `"metadata":`+metadata)
	}
	if spec != "" {
		fields = append(fields, `"spec":`+spec)
	}
	return "{" + strings.Join(fields, ",") + "}"
}

const validSpec = `{"backendFramework":"vllm","services":{"frontend":{"replicas":1}}}`

// patched is object with the answer's JSON patch applied as the API server applies a mutating
// webhook's patch, then read as the API server keeps it: decoded into the type (unknown fields
// pruned, null as absent) and, this being a create of a kind with a status subresource, without
// status.
func patched(t *testing.T, object string, resp *admissionv1.AdmissionResponse) *v1alpha1.DynamoGraphDeployment {
	t.Helper()
	out := []byte(object)
	if len(resp.Patch) > 0 {
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		require.NoError(t, err, "patch %s", resp.Patch)
		out, err = patch.Apply(out)
		require.NoError(t, err, "applying patch %s to %s", resp.Patch, object)
	}
	return asStored(t, out)
}

func asStored(t *testing.T, object []byte) *v1alpha1.DynamoGraphDeployment {
	t.Helper()
	var dgd v1alpha1.DynamoGraphDeployment
	require.NoError(t, json.Unmarshal(object, &dgd), "%s", object)
	dgd.Status = v1alpha1.DynamoGraphDeploymentStatus{}
	return &dgd
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
			rec, out := post(t, mux, mutateDGDPath, dgdReview(admissionv1.Create, tc.object, ""))
			require.Equal(t, http.StatusOK, rec.Code)
			resp := out.Response
			require.NotNil(t, resp)
			assert.Equal(t, types.UID("u-1"), resp.UID)
			require.True(t, resp.Allowed, "%+v", resp.Result)
			require.NotNil(t, resp.Result)
			assert.EqualValues(t, http.StatusOK, resp.Result.Code)
			if tc.want == nil {
				assert.Nil(t, resp.PatchType)
				assert.Empty(t, resp.Patch)
				return
			}
			require.NotNil(t, resp.PatchType)
			assert.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
			if tc.patch != "" {
				assert.JSONEq(t, tc.patch, string(resp.Patch))
			}

			got := patched(t, tc.object, resp)
			want := asStored(t, []byte(tc.object))
			want.Annotations = tc.want
			assert.Equal(t, want, got, "the object as stored after the patch %s", resp.Patch)

			// Reinvocation: the webhook's own output is left as it is.
			once, err := json.Marshal(got)
			require.NoError(t, err)
			_, again := post(t, mux, mutateDGDPath, dgdReview(admissionv1.Create, string(once), ""))
			require.True(t, again.Response.Allowed)
			assert.Empty(t, again.Response.Patch, "a second pass patched %s", once)
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
			_, out := post(t, mux, mutateDGDPath, dgdReview(tc.op, tc.object, tc.old))
			require.NotNil(t, out.Response)
			assert.True(t, out.Response.Allowed)
			assert.EqualValues(t, http.StatusOK, out.Response.Result.Code)
			assert.Nil(t, out.Response.PatchType)
			assert.Empty(t, out.Response.Patch)
		})
	}

	t.Run("A7/no operator version stamps nothing", func(t *testing.T) {
		_, out := post(t, servedMuxWith(t, Config{}), mutateDGDPath, dgdReview(admissionv1.Create, apiServerDGD(""), ""))
		require.True(t, out.Response.Allowed)
		assert.Empty(t, out.Response.Patch)
	})
}

// The mutating webhook is composed with Observed and LeaseAware: a create is logged and
// counted, and in a namespace a restricted operator owns it is skipped, unpatched.
func TestMutatingGraphDeploymentIsObservedAndLeaseAware(t *testing.T) {
	const hook = "mutate-dynamographdeployment"
	lines := &logLines{}
	mux := servedMuxLogging(t, Config{OperatorVersion: testOperatorVersion, Exclusions: namespaceSet{"team-a": true}}, lines.logger())

	skipped, allowed := requests(hook, admissionv1.Create, metrics.ResultSkipped), requests(hook, admissionv1.Create, metrics.ResultAllowed)
	_, out := post(t, mux, mutateDGDPath, dgdReview(admissionv1.Create, apiServerDGD(""), ""))
	require.True(t, out.Response.Allowed)
	assert.Empty(t, out.Response.Patch, "M7: patched in an excluded namespace")
	assert.Equal(t, skipped+1, requests(hook, admissionv1.Create, metrics.ResultSkipped))

	other := strings.ReplaceAll(apiServerDGD(""), `"namespace":"team-a"`, `"namespace":"team-b"`)
	_, out = post(t, mux, mutateDGDPath, dgdReview(admissionv1.Create, other, ""))
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
	const notAnObject = `couldn't get version/kind; json parse error: json: cannot unmarshal %s into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }`
	cases := []struct {
		name, object, want string
	}{
		{"H2/object a string", `"text"`, strings.Replace(notAnObject, "%s", "string", 1)},
		{"H2/object a number", `7`, strings.Replace(notAnObject, "%s", "number", 1)},
		{"H2/object an array", `[]`, strings.Replace(notAnObject, "%s", "array", 1)},
		{"H2/object null", `null`, "there is no content to decode"},
		{"H2/no object", ``, "there is no content to decode"},
		{"H2/a Pod", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"team-a"}}`,
			"unable to decode /v1, Kind=Pod into *v1alpha1.DynamoGraphDeployment"},
		{"H2/another Dynamo kind", `{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoModel","metadata":{"name":"p"}}`,
			"unable to decode nvidia.com/v1alpha1, Kind=DynamoModel into *v1alpha1.DynamoGraphDeployment"},
		{"H2/an unknown version", `{"apiVersion":"nvidia.com/v9","kind":"DynamoGraphDeployment","metadata":{"name":"g"}}`,
			`no kind "DynamoGraphDeployment" is registered for version "nvidia.com/v9" in scheme "pkg/runtime/scheme.go:111"`},
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
	}
	for _, tc := range cases {
		for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Connect} {
			t.Run(tc.name+"/"+string(op), func(t *testing.T) {
				old := ""
				if op == admissionv1.Update {
					old = apiServerDGD("")
				}
				rec, out := post(t, mux, mutateDGDPath, dgdReview(op, tc.object, old))
				require.Equal(t, http.StatusOK, rec.Code)
				resp := out.Response
				require.NotNil(t, resp)
				assert.Equal(t, types.UID("u-1"), resp.UID)
				assert.False(t, resp.Allowed)
				require.NotNil(t, resp.Result)
				assert.EqualValues(t, http.StatusBadRequest, resp.Result.Code)
				assert.Equal(t, tc.want, resp.Result.Message)
				assert.Empty(t, resp.Result.Reason)
				assert.Nil(t, resp.PatchType)
			})
		}
		t.Run(tc.name+"/DELETE", func(t *testing.T) {
			_, out := post(t, mux, mutateDGDPath, dgdReview(admissionv1.Delete, tc.object, tc.object))
			require.NotNil(t, out.Response)
			assert.True(t, out.Response.Allowed)
			assert.EqualValues(t, http.StatusOK, out.Response.Result.Code)
			assert.Nil(t, out.Response.PatchType)
		})
	}
}
