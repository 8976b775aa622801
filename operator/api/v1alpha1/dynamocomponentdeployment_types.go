package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DynamoComponentDeploymentSpec is the desired state of one Dynamo component.
// +kubebuilder:validation:XValidation:rule="has(self.backendFramework) == has(oldSelf.backendFramework) && (!has(self.backendFramework) || self.backendFramework == oldSelf.backendFramework)",message="backendFramework is immutable"
type DynamoComponentDeploymentSpec struct {
	// BackendFramework is the inference backend (sglang, vllm, trtllm). Immutable.
	// +optional
	BackendFramework string `json:"backendFramework,omitempty"`

	DynamoComponentDeploymentSharedSpec `json:",inline"`
}

// DynamoComponentDeploymentStatus is the observed state of a DynamoComponentDeployment.
type DynamoComponentDeploymentStatus struct {
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DynamoComponentDeployment runs one component of a Dynamo inference graph.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dcd
type DynamoComponentDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DynamoComponentDeploymentSpec   `json:"spec,omitempty"`
	Status DynamoComponentDeploymentStatus `json:"status,omitempty"`
}

// DynamoComponentDeploymentList is a list of DynamoComponentDeployments.
// +kubebuilder:object:root=true
type DynamoComponentDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DynamoComponentDeployment `json:"items"`
}

func init() {
	register(&DynamoComponentDeployment{}, &DynamoComponentDeploymentList{})
}
