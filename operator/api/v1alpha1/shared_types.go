package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

// VLLMDistributedExecutorBackendAnnotation selects vLLM's distributed executor backend for a
// component. Allowed values are listed in VLLMDistributedExecutorBackends.
const VLLMDistributedExecutorBackendAnnotation = "nvidia.com/vllm-distributed-executor-backend"

// VLLMDistributedExecutorBackends are the values VLLMDistributedExecutorBackendAnnotation accepts.
var VLLMDistributedExecutorBackends = []string{"mp", "ray"}

// OperatorOriginVersionAnnotation records the version of the operator that first admitted a
// DynamoGraphDeployment; the mutating webhook stamps it on create when absent.
const OperatorOriginVersionAnnotation = "nvidia.com/dynamo-operator-origin-version"

// DynamoComponentDeploymentSharedSpec is the part of a component's spec that a
// DynamoComponentDeployment and each service of a DynamoGraphDeployment have in common.
type DynamoComponentDeploymentSharedSpec struct {
	// Annotations are added to the component's pods. The annotation
	// nvidia.com/vllm-distributed-executor-backend accepts "mp" or "ray".
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// ServiceName is the name of the service inside its graph.
	// +optional
	ServiceName string `json:"serviceName,omitempty"`

	// ComponentType is the role of the component (frontend, worker, planner, …).
	// +optional
	ComponentType string `json:"componentType,omitempty"`

	// DynamoNamespace is deprecated: the namespace is derived from the graph. Setting it is
	// admitted with a warning.
	// +optional
	DynamoNamespace *string `json:"dynamoNamespace,omitempty"`

	// Autoscaling is deprecated in favour of external autoscalers. Setting it is admitted with a
	// warning.
	// +optional
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`

	// Replicas is the number of replicas; it must not be negative.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Multinode spreads one replica over several nodes. Whether a service is multinode cannot
	// change after creation.
	// +optional
	Multinode *MultinodeSpec `json:"multinode,omitempty"`

	// Ingress exposes the component.
	// +optional
	Ingress *IngressSpec `json:"ingress,omitempty"`

	// VolumeMounts mount the graph's PVCs into the component.
	// +optional
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`

	// SharedMemory sizes /dev/shm.
	// +optional
	SharedMemory *SharedMemorySpec `json:"sharedMemory,omitempty"`

	// Image overrides the component's container image.
	// +optional
	Image string `json:"image,omitempty"`
}

// Autoscaling is the deprecated built-in autoscaling configuration.
type Autoscaling struct {
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// +optional
	MinReplicas int32 `json:"minReplicas,omitempty"`
	// +optional
	MaxReplicas int32 `json:"maxReplicas,omitempty"`
}

// MultinodeSpec describes a replica that spans several nodes.
type MultinodeSpec struct {
	// NodeCount is the number of nodes one replica spans.
	// +kubebuilder:validation:Minimum=2
	NodeCount int32 `json:"nodeCount"`
}

// IngressSpec exposes a component outside the cluster.
type IngressSpec struct {
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Host is required when Enabled is true.
	// +optional
	Host string `json:"host,omitempty"`
}

// VolumeMount mounts a PVC of the graph into a component.
type VolumeMount struct {
	// Name is the name of the PVC.
	Name string `json:"name"`
	// MountPoint is the path in the container; required unless UseAsCompilationCache is set.
	// +optional
	MountPoint string `json:"mountPoint,omitempty"`
	// UseAsCompilationCache mounts the volume at the backend's default compilation cache path.
	// +optional
	UseAsCompilationCache bool `json:"useAsCompilationCache,omitempty"`
}

// SharedMemorySpec sizes the component's shared memory.
type SharedMemorySpec struct {
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// Size is required unless Disabled is true.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
}
