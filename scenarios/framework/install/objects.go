package install

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// Resources of the Dynamo API, as users address them.
var (
	GraphDeployments        = schema.GroupVersionResource{Group: DynamoGroup, Version: "v1alpha1", Resource: "dynamographdeployments"}
	ComponentDeployments    = schema.GroupVersionResource{Group: DynamoGroup, Version: "v1alpha1", Resource: "dynamocomponentdeployments"}
	Models                  = schema.GroupVersionResource{Group: DynamoGroup, Version: "v1alpha1", Resource: "dynamomodels"}
	GraphDeploymentRequests = schema.GroupVersionResource{Group: DynamoGroup, Version: "v1beta1", Resource: "dynamographdeploymentrequests"}
)

// Webhook names of the operator (from the operator's +kubebuilder:webhook markers).
const (
	GraphDeploymentValidatingWebhook        = "vdynamographdeployment.nvidia.com"
	GraphDeploymentMutatingWebhook          = "mdynamographdeployment.nvidia.com"
	GraphDeploymentRequestMutatingWebhook   = "mdynamographdeploymentrequest.nvidia.com"
	GraphDeploymentRequestValidatingWebhook = "vdynamographdeploymentrequest.nvidia.com"
)

// OriginVersionAnnotation is what the mutating webhook stamps on DynamoGraphDeployments.
const OriginVersionAnnotation = "nvidia.com/dynamo-operator-origin-version"

// GraphDeployment is a valid DynamoGraphDeployment with one single-node service, the smallest
// object every validation rule admits.
func GraphDeployment(namespace, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nvidia.com/v1alpha1",
		"kind":       "DynamoGraphDeployment",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"backendFramework": "vllm",
			"services":         map[string]any{"frontend": map[string]any{"replicas": int64(1)}},
		},
	}}
}

// InvalidGraphDeployment is a DynamoGraphDeployment without services: the schema admits it,
// the validating webhook denies it (spec.services: at least one service is required).
func InvalidGraphDeployment(namespace, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nvidia.com/v1alpha1",
		"kind":       "DynamoGraphDeployment",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       map[string]any{"backendFramework": "vllm"},
	}}
}

// GraphDeploymentRequest is a valid v1beta1 DynamoGraphDeploymentRequest without an image, so
// the mutating webhook sets the default one.
func GraphDeploymentRequest(namespace, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nvidia.com/v1beta1",
		"kind":       "DynamoGraphDeploymentRequest",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       map[string]any{"model": "llama", "backend": "vllm"},
	}}
}

// DeniedBy is the start of the API server's message for a denial by webhook name.
func DeniedBy(webhook string) string {
	return fmt.Sprintf("admission webhook %q denied the request", webhook)
}

// removeFinalizers clears the finalizers of every object of a resource in every namespace.
func removeFinalizers(ctx context.Context, dyn dynamic.Interface, group, plural, version string) error {
	gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
	list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
	}
	for _, obj := range list.Items {
		if len(obj.GetFinalizers()) == 0 {
			continue
		}
		_, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing finalizers of %s %s/%s: %w", gvr.GroupResource(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

func storageVersion(versions []apiextensionsv1.CustomResourceDefinitionVersion) string {
	for _, v := range versions {
		if v.Storage {
			return v.Name
		}
	}
	if len(versions) > 0 {
		return versions[0].Name
	}
	return ""
}
