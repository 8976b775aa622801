package suite

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// ResourceOf is the client for obj's kind: in namespace ns when the kind is namespaced (obj's
// own namespace when ns is ""), cluster-wide otherwise.
func (c *Cluster) ResourceOf(obj *unstructured.Unstructured, ns string) (dynamic.ResourceInterface, error) {
	m, err := c.RESTMappingOf(obj)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return c.dynamic.Resource(m.Resource), nil
	}
	if ns == "" {
		ns = obj.GetNamespace()
	}
	return c.dynamic.Resource(m.Resource).Namespace(ns), nil
}

// RESTMappingOf is obj's kind as the cluster serves it: its resource and scope. Kinds are found
// by discovery, asked again when one is not known yet (a CRD created a moment ago).
func (c *Cluster) RESTMappingOf(obj *unstructured.Unstructured) (*meta.RESTMapping, error) {
	c.mapperOnce.Do(func() {
		c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.kube.Discovery()))
	})
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.mapper.Reset()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("the cluster serves no %s: %w", gvk, err)
	}
	return m, nil
}

// mapping holds the Cluster's REST mapper, made on first use.
type mapping struct {
	mapperOnce sync.Once
	mapper     *restmapper.DeferredDiscoveryRESTMapper
}
