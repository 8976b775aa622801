// Package v1beta1 contains the nvidia.com/v1beta1 Dynamo API: the storage version of
// DynamoGraphDeploymentRequest (the conversion hub).
// +kubebuilder:object:generate=true
// +groupName=nvidia.com
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "nvidia.com", Version: "v1beta1"}

	// SchemeBuilder registers this package's types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
