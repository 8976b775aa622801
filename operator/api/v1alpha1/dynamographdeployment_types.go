package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DynamoGraphDeploymentFinalizer is added by the operator to every DynamoGraphDeployment and
// removed once the graph's resources are cleaned up.
const DynamoGraphDeploymentFinalizer = "nvidia.com/dynamo-graph-deployment"

// MaxGraphAndServiceNameLength bounds len(graph name)+len(service name): derived resource
// names must stay valid DNS labels.
const MaxGraphAndServiceNameLength = 45

// RestartStrategyType orders how services restart.
// +kubebuilder:validation:Enum=Sequential;Parallel
type RestartStrategyType string

// Restart strategies.
const (
	RestartStrategySequential RestartStrategyType = "Sequential"
	RestartStrategyParallel   RestartStrategyType = "Parallel"
)

// DynamoGraphDeploymentSpec is the desired state of a Dynamo inference graph.
// +kubebuilder:validation:XValidation:rule="has(self.backendFramework) == has(oldSelf.backendFramework) && (!has(self.backendFramework) || self.backendFramework == oldSelf.backendFramework)",message="backendFramework is immutable"
type DynamoGraphDeploymentSpec struct {
	// BackendFramework is the inference backend (sglang, vllm, trtllm). Immutable.
	// +optional
	BackendFramework string `json:"backendFramework,omitempty"`

	// Services are the graph's components by service name; at least one. Services cannot be
	// added or removed after creation.
	// +optional
	Services map[string]*DynamoComponentDeploymentSharedSpec `json:"services,omitempty"`

	// PVCs are persistent volume claims the graph uses or creates.
	// +optional
	PVCs []PVC `json:"pvcs,omitempty"`

	// Restart requests a coordinated restart of the graph's services.
	// +optional
	Restart *Restart `json:"restart,omitempty"`
}

// PVC names a persistent volume claim used by the graph, optionally created by the operator.
type PVC struct {
	// Name of the claim. Required.
	// +optional
	Name *string `json:"name,omitempty"`
	// Create asks the operator to create the claim; StorageClass, Size and VolumeAccessMode are
	// then required.
	// +optional
	Create *bool `json:"create,omitempty"`
	// +optional
	StorageClass string `json:"storageClass,omitempty"`
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// +optional
	VolumeAccessMode string `json:"volumeAccessMode,omitempty"`
}

// Restart asks for a restart of the graph's services, identified by ID.
type Restart struct {
	// ID identifies this restart request; changing it triggers a new restart. Required.
	// +optional
	ID string `json:"id,omitempty"`
	// +optional
	Strategy *RestartStrategy `json:"strategy,omitempty"`
}

// RestartStrategy says how services restart.
type RestartStrategy struct {
	// +optional
	Type RestartStrategyType `json:"type,omitempty"`
	// Order lists every service exactly once (Sequential only).
	// +optional
	Order []string `json:"order,omitempty"`
}

// DynamoGraphDeploymentStatus is the observed state of a DynamoGraphDeployment.
type DynamoGraphDeploymentStatus struct {
	// State summarises the graph: pending, successful, failed, deleting.
	// +optional
	State string `json:"state,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DynamoGraphDeployment is a Dynamo inference graph: a set of services deployed together.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dgd
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
type DynamoGraphDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DynamoGraphDeploymentSpec   `json:"spec,omitempty"`
	Status DynamoGraphDeploymentStatus `json:"status,omitempty"`
}

// DynamoGraphDeploymentList is a list of DynamoGraphDeployments.
// +kubebuilder:object:root=true
type DynamoGraphDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DynamoGraphDeployment `json:"items"`
}

func init() {
	register(&DynamoGraphDeployment{}, &DynamoGraphDeploymentList{})
}
