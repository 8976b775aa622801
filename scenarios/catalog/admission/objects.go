package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
)

// kind is one Dynamo resource as the scenarios write it: its API version, the name the API
// server uses for it in messages, and the validating webhook that judges it.
type kind struct {
	gvr        schema.GroupVersionResource
	name       string // DynamoGraphDeployment
	validating string // webhook name, from the operator's +kubebuilder:webhook markers
	// celRules: this version's schema has CEL rules, which the API server skips, saying so,
	// when the OpenAPI schema already refused an object.
	celRules bool
}

var (
	componentDeployments = kind{dynamo.ComponentDeployments, "DynamoComponentDeployment", "vdynamocomponentdeployment.nvidia.com", true}
	graphDeployments     = kind{dynamo.GraphDeployments, "DynamoGraphDeployment", dynamo.GraphDeploymentValidatingWebhook, true}
	models               = kind{dynamo.Models, "DynamoModel", "vdynamomodel.nvidia.com", true}
	requests             = kind{dynamo.GraphDeploymentRequests, "DynamoGraphDeploymentRequest", dynamo.GraphDeploymentRequestValidatingWebhook, true}
	// requestsV1alpha1 are requests written in their older served version, which the API server
	// checks against that version's schema.
	requestsV1alpha1 = kind{requestsGVR("v1alpha1"), "DynamoGraphDeploymentRequest", dynamo.GraphDeploymentRequestValidatingWebhook, false}
)

func requestsGVR(version string) schema.GroupVersionResource {
	gvr := dynamo.GraphDeploymentRequests
	gvr.Version = version
	return gvr
}

// webhookLabel is the operator's name for the kind's validating webhook in its metrics'
// webhook label: "validate-" and the kind in lower case.
func (k kind) webhookLabel() string { return "validate-" + strings.ToLower(k.name) }

// object is a manifest of this kind with the given spec.
func (k kind) object(namespace, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": k.gvr.GroupVersion().String(),
		"kind":       k.name,
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       spec,
	}}
}

// denial is the API server's message when this kind's validating webhook denies namespace/name
// with the given causes ("<field path>: <problem>"), word for word as API clients receive it.
func (k kind) denial(namespace, name string, causes ...string) string {
	return fmt.Sprintf("%s: %s %s/%s is invalid: %s", dynamo.DeniedBy(k.validating), k.name, namespace, name, strings.Join(causes, "; "))
}

// schemaDenial is the API server's message when the CRD itself refuses name — its OpenAPI
// schema (enum, minimum, required, pattern) or an x-kubernetes-validations (CEL) rule — with
// causes ("<field path>: <problem>"; a CEL rule on the object's root is at "<nil>"). This
// validation runs before any validating webhook is called, so it is what users see for the
// rules the CRDs carry.
func (k kind) schemaDenial(name string, causes ...string) string {
	cause := strings.Join(causes, ", ")
	if len(causes) > 1 {
		cause = "[" + cause + "]"
	}
	return fmt.Sprintf(`%s.%s %q is invalid: %s`, k.name, k.gvr.Group, name, cause)
}

func (k kind) String() string { return k.name }

// tryCreate creates obj through dyn and returns the API server's answer.
func (k kind) tryCreate(ctx context.Context, dyn dynamic.Interface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return dyn.Resource(k.gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
}

// mustCreate creates obj and stops the test if it is not admitted.
func (k kind) mustCreate(ctx context.Context, t *testing.T, dyn dynamic.Interface, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := k.tryCreate(ctx, dyn, obj)
	expect.NoError(t, err, "creating %s %s", k, ref(obj.GetNamespace(), obj.GetName()))
	return got
}

// tryPatch sends a JSON merge patch (what `kubectl patch --type merge` sends), the way a user
// changes an object the operator also writes to, without resourceVersion conflicts.
func (k kind) tryPatch(ctx context.Context, dyn dynamic.Interface, namespace, name string, patch map[string]any) (*unstructured.Unstructured, error) {
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encoding the patch of %s %s: %w", k, ref(namespace, name), err)
	}
	return dyn.Resource(k.gvr).Namespace(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
}

// patchStatus sets fields of the status subresource, as a controller would.
func (k kind) patchStatus(ctx context.Context, t *testing.T, dyn dynamic.Interface, namespace, name string, status map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"status": status})
	expect.NoError(t, err, "encoding the status of %s %s", k, ref(namespace, name))
	_, err = dyn.Resource(k.gvr).Namespace(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	expect.NoError(t, err, "patching the status of %s %s to %s", k, ref(namespace, name), body)
}

// merged is base with the keys of over set on a shallow copy.
func merged(base map[string]any, over map[string]any) map[string]any {
	out := maps.Clone(base)
	maps.Copy(out, over)
	return out
}

// componentSpec is the smallest DynamoComponentDeployment spec every rule admits.
func componentSpec() map[string]any {
	return map[string]any{"backendFramework": "vllm", "replicas": int64(1)}
}

// graphSpec is a DynamoGraphDeployment spec with the given services, each a component spec.
func graphSpec(services map[string]any) map[string]any {
	return map[string]any{"backendFramework": "vllm", "services": services}
}

// modelSpec is a valid base DynamoModel spec.
func modelSpec() map[string]any {
	return map[string]any{"modelName": "llama-3-8b", "baseModelName": "meta-llama/Llama-3-8B", "modelType": "base"}
}

// expectDenied checks that err is, word for word, the denial want. doing names the request
// ("creating DynamoModel ns/name").
func expectDenied(t *testing.T, doing string, err error, want string) {
	t.Helper()
	switch {
	case err == nil:
		expect.Errorf(t, "%s: expected the denial %q, saw the request admitted", doing, want)
	case err.Error() != want:
		expect.Errorf(t, "%s: expected the denial %q, saw %q", doing, want, err.Error())
	}
}

// expectAdmitted checks that the request was admitted.
func expectAdmitted(t *testing.T, doing string, err error) bool {
	t.Helper()
	if err != nil {
		expect.Errorf(t, "%s: expected it admitted, saw %q", doing, err.Error())
		return false
	}
	return true
}

// expectStored checks that each field of want is stored in component as written (compared
// as JSON, so 1 and int64(1) are equal); what names the component ("spec of
// DynamoComponentDeployment ns/name").
func expectStored(t *testing.T, what string, component, want map[string]any) {
	t.Helper()
	for _, key := range slices.Sorted(maps.Keys(want)) {
		w, _ := json.Marshal(want[key])
		g, _ := json.Marshal(component[key])
		if string(w) != string(g) {
			expect.Errorf(t, "%s as stored, field %s: expected %s, saw %s", what, key, w, g)
		}
	}
}

// nestedMap is the map at path in obj, or nil.
func nestedMap(obj *unstructured.Unstructured, path ...string) map[string]any {
	m, _, _ := unstructured.NestedMap(obj.Object, path...)
	return m
}

func ref(namespace, name string) string { return namespace + "/" + name }
