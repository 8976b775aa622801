package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Model types.
const (
	ModelTypeBase = "base"
	ModelTypeLoRA = "lora"
)

// LoRASourceSchemes are the URI schemes a LoRA model's source may use.
var LoRASourceSchemes = []string{"s3://", "hf://"}

// DynamoModelSpec is the desired state of a model served by Dynamo.
// +kubebuilder:validation:XValidation:rule="has(self.modelType) == has(oldSelf.modelType) && (!has(self.modelType) || self.modelType == oldSelf.modelType)",message="modelType is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.baseModelName) == has(oldSelf.baseModelName) && (!has(self.baseModelName) || self.baseModelName == oldSelf.baseModelName)",message="baseModelName is immutable"
type DynamoModelSpec struct {
	// ModelName is the name clients request. Required.
	// +optional
	ModelName string `json:"modelName,omitempty"`
	// BaseModelName is the served base model. Required and immutable.
	// +optional
	BaseModelName string `json:"baseModelName,omitempty"`
	// ModelType is base or lora. Immutable.
	// +kubebuilder:validation:Enum=base;lora
	// +optional
	ModelType string `json:"modelType,omitempty"`
	// Source locates a LoRA adapter; required for lora with an s3:// or hf:// URI.
	// +optional
	Source *ModelSource `json:"source,omitempty"`
}

// ModelSource locates model weights.
type ModelSource struct {
	// +optional
	URI string `json:"uri,omitempty"`
}

// DynamoModelStatus is the observed state of a DynamoModel.
type DynamoModelStatus struct {
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DynamoModel declares a model (or LoRA adapter) that Dynamo graphs serve.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dm
type DynamoModel struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DynamoModelSpec   `json:"spec,omitempty"`
	Status DynamoModelStatus `json:"status,omitempty"`
}

// DynamoModelList is a list of DynamoModels.
// +kubebuilder:object:root=true
type DynamoModelList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DynamoModel `json:"items"`
}

func init() {
	register(&DynamoModel{}, &DynamoModelList{})
}
