// Package defaulting holds the operator's mutating admission rules (CATALOG.md A7), one per
// kind. Every rule is idempotent: applied to its own output it changes nothing, so apiserver
// reinvocation is safe.
package defaulting

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// GraphDeployment stamps the version of the operator that first admitted a
// DynamoGraphDeployment (annotation v1alpha1.OperatorOriginVersionAnnotation) on create,
// unless the object already carries one: upgrades must not rewrite a graph's origin.
type GraphDeployment struct {
	// OperatorVersion is the value stamped; empty disables stamping.
	OperatorVersion string
}

// Patch returns the JSON patch that stamps dgd, the object of the admission request in ctx:
// on create, one operation adding the annotation when dgd has none, else nothing. The
// annotation is all the rule adds, so the patch is written out directly rather than found by
// diffing a stamped copy against the object, which costs more than the rest of the call.
func (d GraphDeployment) Patch(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]jsonpatch.JsonPatchOperation, error) {
	op, err := operation(ctx)
	if err != nil {
		return nil, fmt.Errorf("defaulting DynamoGraphDeployment %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	if op != admissionv1.Create || d.OperatorVersion == "" {
		return nil, nil
	}
	if _, ok := dgd.Annotations[v1alpha1.OperatorOriginVersionAnnotation]; ok {
		return nil, nil
	}
	return []jsonpatch.JsonPatchOperation{addAnnotation(&dgd.ObjectMeta, v1alpha1.OperatorOriginVersionAnnotation, d.OperatorVersion)}, nil
}

// addAnnotation is the JSON patch operation that adds the annotation key=value to the object
// whose metadata decoded as meta. An "add" replaces a member that is there, so a null
// annotations map or metadata is replaced, and a missing one created.
func addAnnotation(meta *metav1.ObjectMeta, key, value string) jsonpatch.JsonPatchOperation {
	switch {
	case meta.Annotations != nil: // a map, maybe empty
		return jsonpatch.NewOperation("add", "/metadata/annotations/"+pointerEscaper.Replace(key), value)
	case reflect.ValueOf(*meta).IsZero(): // metadata missing, null, or without a field of ObjectMeta
		return jsonpatch.NewOperation("add", "/metadata", map[string]any{"annotations": map[string]string{key: value}})
	default: // annotations missing or null
		return jsonpatch.NewOperation("add", "/metadata/annotations", map[string]string{key: value})
	}
}

// pointerEscaper escapes a key as a JSON pointer's reference token (RFC 6901): "~" as "~0",
// "/" as "~1".
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// GraphDeploymentRequest fills in the profiler image of a DynamoGraphDeploymentRequest (in
// its v1beta1 hub form) when none is set.
type GraphDeploymentRequest struct {
	// Image is the default profiler image; empty disables defaulting.
	Image string
}

// Patch returns the JSON patch that fills in the image of r, the object of the admission
// request in ctx: one operation when r has none, else nothing. On update it leaves a request
// alone while the old object is in a phase that locks the spec: filling in the image would
// change the spec, and the CRD's CEL rule would then reject an update that only touched
// labels or annotations.
func (d GraphDeploymentRequest) Patch(ctx context.Context, r *v1beta1.DynamoGraphDeploymentRequest) ([]jsonpatch.JsonPatchOperation, error) {
	if d.Image == "" || r.Spec.Image != "" {
		return nil, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("defaulting DynamoGraphDeploymentRequest %s/%s: %w", r.Namespace, r.Name, err)
	}
	if req.Operation == admissionv1.Update {
		var old v1beta1.DynamoGraphDeploymentRequest
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return nil, fmt.Errorf("defaulting DynamoGraphDeploymentRequest %s/%s: decoding the old object: %w", r.Namespace, r.Name, err)
		}
		if slices.Contains(v1beta1.SpecLockedPhases, old.Status.Phase) {
			return nil, nil
		}
	}
	return []jsonpatch.JsonPatchOperation{addImage(req.Object.Raw, d.Image)}, nil
}

// addImage is the JSON patch operation that sets the image of the request object, as the API
// server sent it. An "add" replaces a member that is there, so an empty image is replaced; a
// spec that is missing or null is added with just the image. The object's spec is looked at as
// sent, not as decoded: a spec of members that decode as absent ("autoApply": false) keeps them.
func addImage(object []byte, image string) jsonpatch.JsonPatchOperation {
	var sent struct {
		Spec json.RawMessage `json:"spec"`
	}
	if json.Unmarshal(object, &sent) == nil && len(sent.Spec) > 0 && sent.Spec[0] == '{' {
		return jsonpatch.NewOperation("add", "/spec/image", image)
	}
	return jsonpatch.NewOperation("add", "/spec", map[string]string{"image": image})
}

func operation(ctx context.Context) (admissionv1.Operation, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return "", err
	}
	return req.Operation, nil
}
