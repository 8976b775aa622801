// Package dynamo is the reference operator's API as scenarios write it: the Dynamo resources,
// the names of the operator's webhooks and what they stamp or answer, and the smallest valid
// and invalid objects to send them.
package dynamo

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of the Dynamo CRDs.
const Group = "nvidia.com"

// Resources of the Dynamo API, as users address them.
var (
	GraphDeployments        = schema.GroupVersionResource{Group: Group, Version: "v1alpha1", Resource: "dynamographdeployments"}
	ComponentDeployments    = schema.GroupVersionResource{Group: Group, Version: "v1alpha1", Resource: "dynamocomponentdeployments"}
	Models                  = schema.GroupVersionResource{Group: Group, Version: "v1alpha1", Resource: "dynamomodels"}
	GraphDeploymentRequests = schema.GroupVersionResource{Group: Group, Version: "v1beta1", Resource: "dynamographdeploymentrequests"}
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
