package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Backend is the inference backend a request profiles.
// +kubebuilder:validation:Enum=auto;sglang;trtllm;vllm
type Backend string

// Backends.
const (
	BackendAuto   Backend = "auto"
	BackendSGLang Backend = "sglang"
	BackendTRTLLM Backend = "trtllm"
	BackendVLLM   Backend = "vllm"
)

// SearchStrategy says how thoroughly the profiler searches configurations.
// +kubebuilder:validation:Enum=rapid;thorough
type SearchStrategy string

// Search strategies.
const (
	SearchStrategyRapid    SearchStrategy = "rapid"
	SearchStrategyThorough SearchStrategy = "thorough"
)

// Phase is where a request is in its life.
// +kubebuilder:validation:Enum=Pending;Profiling;Deploying;Deployed;Failed
type Phase string

// Phases. A request's spec is immutable while it is Profiling, Deploying or Deployed.
const (
	PhasePending   Phase = "Pending"
	PhaseProfiling Phase = "Profiling"
	PhaseDeploying Phase = "Deploying"
	PhaseDeployed  Phase = "Deployed"
	PhaseFailed    Phase = "Failed"
)

// SpecLockedPhases are the phases in which a request's spec cannot change.
var SpecLockedPhases = []Phase{PhaseProfiling, PhaseDeploying, PhaseDeployed}

// DynamoGraphDeploymentRequestSpec asks Dynamo to profile a model and deploy the best graph.
type DynamoGraphDeploymentRequestSpec struct {
	// Model is the model to profile and serve.
	// +optional
	Model string `json:"model,omitempty"`
	// Backend to profile; auto lets the profiler choose (not allowed with a thorough search).
	// +optional
	Backend Backend `json:"backend,omitempty"`
	// Image runs the profiler; the mutating webhook fills in the operator's default.
	// +optional
	Image string `json:"image,omitempty"`
	// SearchStrategy is rapid (simulated) or thorough (measured on real hardware).
	// +optional
	SearchStrategy SearchStrategy `json:"searchStrategy,omitempty"`
	// AutoApply deploys the recommended graph when profiling finishes.
	// +optional
	AutoApply bool `json:"autoApply,omitempty"`
	// SLA targets the profiler optimises for.
	// +optional
	SLA *SLA `json:"sla,omitempty"`
}

// SLA holds latency targets in milliseconds.
type SLA struct {
	// TTFTMilliseconds is the time-to-first-token target.
	// +optional
	TTFTMilliseconds int32 `json:"ttftMilliseconds,omitempty"`
	// ITLMilliseconds is the inter-token latency target.
	// +optional
	ITLMilliseconds int32 `json:"itlMilliseconds,omitempty"`
}

// DynamoGraphDeploymentRequestStatus is the observed state of a request.
type DynamoGraphDeploymentRequestStatus struct {
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DynamoGraphDeploymentRequest asks Dynamo to profile a model and deploy the recommended graph.
// v1beta1 is the storage version and the conversion hub.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dgdr
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ['Profiling','Deploying','Deployed']) || self.spec == oldSelf.spec",message="spec is immutable while the request is Profiling, Deploying or Deployed"
type DynamoGraphDeploymentRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DynamoGraphDeploymentRequestSpec   `json:"spec,omitempty"`
	Status DynamoGraphDeploymentRequestStatus `json:"status,omitempty"`
}

// DynamoGraphDeploymentRequestList is a list of DynamoGraphDeploymentRequests.
// +kubebuilder:object:root=true
type DynamoGraphDeploymentRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DynamoGraphDeploymentRequest `json:"items"`
}

// Hub marks v1beta1 as the conversion hub.
func (*DynamoGraphDeploymentRequest) Hub() {}

func init() {
	register(&DynamoGraphDeploymentRequest{}, &DynamoGraphDeploymentRequestList{})
}
