package procnode

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// clusterObjects serves Secrets and ConfigMaps from informer caches (falling back to a
// live read when the cache has not seen a new object yet) and ServiceAccount tokens from
// TokenRequest, cached per pod and refreshed like kubelet's token manager.
type clusterObjects struct {
	client     kubernetes.Interface
	secrets    corelisters.SecretLister
	configMaps corelisters.ConfigMapLister

	mu     sync.Mutex
	tokens map[tokenKey]cachedToken
}

type tokenKey struct {
	pod      types.UID
	audience string
	seconds  int64
}

type cachedToken struct {
	token     string
	refreshAt time.Time
}

func (o *clusterObjects) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	s, err := o.secrets.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		s, err = o.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	}
	return s, err
}

func (o *clusterObjects) configMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	cm, err := o.configMaps.ConfigMaps(ns).Get(name)
	if apierrors.IsNotFound(err) {
		cm, err = o.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	}
	return cm, err
}

// serviceAccountToken requests a token bound to the pod, so it stops working when the pod
// is deleted — exactly the credential a real pod gets.
func (o *clusterObjects) serviceAccountToken(ctx context.Context, pod *corev1.Pod, audience string, seconds int64) (string, error) {
	key := tokenKey{pod: pod.UID, audience: audience, seconds: seconds}
	o.mu.Lock()
	cached, ok := o.tokens[key]
	o.mu.Unlock()
	if ok && time.Now().Before(cached.refreshAt) {
		return cached.token, nil
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &seconds,
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
			},
		},
	}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	issued := time.Now()
	resp, err := o.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s (pod %s): %w", pod.Namespace, sa, pod.Name, err)
	}
	lifetime := resp.Status.ExpirationTimestamp.Sub(issued)
	o.mu.Lock()
	if o.tokens == nil {
		o.tokens = map[tokenKey]cachedToken{}
	}
	o.tokens[key] = cachedToken{token: resp.Status.Token, refreshAt: tokenRefreshAt(issued, lifetime)}
	o.mu.Unlock()
	return resp.Status.Token, nil
}

func (o *clusterObjects) forgetPod(uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range o.tokens {
		if k.pod == uid {
			delete(o.tokens, k)
		}
	}
}
