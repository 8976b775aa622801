package procnode

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// staticObjects is a fixed set of Secrets and ConfigMaps for unit tests of the pure
// volume and env logic; the integration test covers the informer-backed source.
type staticObjects struct {
	secrets    map[string]*corev1.Secret
	configMaps map[string]*corev1.ConfigMap
	tokens     []string // audiences requested, in order
}

func (s *staticObjects) secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if sec, ok := s.secrets[ns+"/"+name]; ok {
		return sec, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (s *staticObjects) configMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if cm, ok := s.configMaps[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (s *staticObjects) serviceAccountToken(_ context.Context, pod *corev1.Pod, audience string, seconds int64) (string, error) {
	s.tokens = append(s.tokens, audience)
	return fmt.Sprintf("token-for-%s/%s-%s-%d", pod.Namespace, pod.Spec.ServiceAccountName, audience, seconds), nil
}
