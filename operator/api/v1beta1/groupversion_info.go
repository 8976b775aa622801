// Package v1beta1 contains the nvidia.com/v1beta1 Dynamo API: the storage version of
// DynamoGraphDeploymentRequest (the conversion hub).
// +kubebuilder:object:generate=true
// +groupName=nvidia.com
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "nvidia.com", Version: "v1beta1"}

	// SchemeBuilder registers this package's types with a runtime.Scheme; each type's file adds
	// its kinds in init (register). Plain apimachinery, so importing the API pulls in no
	// controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
)

// AddToScheme adds this package's types to a scheme. A function rather than the method value
// SchemeBuilder.AddToScheme, which would copy the builder before the init funcs register types.
func AddToScheme(s *runtime.Scheme) error { return SchemeBuilder.AddToScheme(s) }

// register adds objects to SchemeBuilder as kinds of GroupVersion.
func register(objects ...runtime.Object) {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, objects...)
		return nil
	})
}
