// Package v1alpha1 contains the nvidia.com/v1alpha1 Dynamo API: DynamoComponentDeployment,
// DynamoGraphDeployment, DynamoModel and the served (non-storage) version of
// DynamoGraphDeploymentRequest.
// +kubebuilder:object:generate=true
// +groupName=nvidia.com
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "nvidia.com", Version: "v1alpha1"}

	// SchemeBuilder registers this package's types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
