package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DynamoGraphDeploymentRequestSpec is the v1alpha1 shape of a profiling request. It predates
// v1beta1's searchStrategy and image: the profiler image lives under profilingConfig, and the
// search is chosen with useAIConfigurator (true = rapid).
type DynamoGraphDeploymentRequestSpec struct {
	// +optional
	Model string `json:"model,omitempty"`
	// +kubebuilder:validation:Enum=auto;sglang;trtllm;vllm
	// +optional
	Backend string `json:"backend,omitempty"`
	// +optional
	ProfilingConfig *ProfilingConfig `json:"profilingConfig,omitempty"`
	// +optional
	AutoApply bool `json:"autoApply,omitempty"`
	// +optional
	SLA *SLA `json:"sla,omitempty"`
}

// ProfilingConfig configures the profiler job.
type ProfilingConfig struct {
	// ProfilerImage is v1beta1's spec.image.
	// +optional
	ProfilerImage string `json:"profilerImage,omitempty"`
	// UseAIConfigurator selects the rapid (simulated) search; false is thorough. Unset means the
	// search strategy is unset.
	// +optional
	UseAIConfigurator *bool `json:"useAIConfigurator,omitempty"`
}

// SLA holds latency targets in milliseconds.
type SLA struct {
	// +optional
	TTFT int32 `json:"ttft,omitempty"`
	// +optional
	ITL int32 `json:"itl,omitempty"`
}

// DynamoGraphDeploymentRequestStatus is the v1alpha1 observed state; State is v1beta1's phase.
type DynamoGraphDeploymentRequestStatus struct {
	// +optional
	State string `json:"state,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DynamoGraphDeploymentRequest (v1alpha1) is served for older clients and converted to and
// from the v1beta1 storage version by the operator's conversion webhook.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dgdr
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

func init() {
	register(&DynamoGraphDeploymentRequest{}, &DynamoGraphDeploymentRequestList{})
}
