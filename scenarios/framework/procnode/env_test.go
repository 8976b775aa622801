package procnode

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestContainerEnvResolvesDownwardAPIAndReferences(t *testing.T) {
	pod := volumePod()
	pod.Spec.NodeName = "node-1"
	pod.Status.PodIP = "10.244.0.7"
	c := &corev1.Container{
		Name: "c",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("1500m")}},
		EnvFrom: []corev1.EnvFromSource{
			{Prefix: "CM_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}},
		},
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "SA", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
			{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			{Name: "CERT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "certs"}, Key: "tls.crt"}}},
			{Name: "ABSENT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "certs"}, Key: "nope", Optional: ptr.To(true)}}},
			{Name: "ROOT_CA", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Key: "ca.crt"}}},
			{Name: "URL", Value: "https://$(POD_NAME).$(POD_NAMESPACE):$(PORT)/$$(POD_NAME)"},
		},
	}
	env, err := containerEnv(context.Background(), testObjects(), pod, c, nil, apiEndpoint{host: "10.244.0.1", port: 6443}, "")
	require.NoError(t, err)
	for _, want := range []string{
		"POD_NAME=op-0", "POD_NAMESPACE=ns", "POD_IP=10.244.0.7", "SA=op", "NODE=node-1",
		"MEM=64", "CPU=2", "CERT=CERT", "ROOT_CA=ROOT", "CM_ca.crt=ROOT",
		"URL=https://op-0.ns:$(PORT)/$(POD_NAME)",
		"KUBERNETES_SERVICE_HOST=10.244.0.1", "KUBERNETES_SERVICE_PORT=6443", "HOSTNAME=op-0",
	} {
		assert.True(t, slices.Contains(env, want), "env lacks %q: %q", want, env)
	}
	for _, kv := range env {
		assert.False(t, kv == "ABSENT=" || len(kv) > 7 && kv[:7] == "ABSENT=", "optional missing key still set: %q", kv)
	}
}

func TestContainerEnvMissingReferenceIsAConfigError(t *testing.T) {
	c := &corev1.Container{Name: "c", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "certs"}, Key: "nope"}}}}}
	_, err := containerEnv(context.Background(), testObjects(), volumePod(), c, nil, apiEndpoint{}, "")
	var cfgErr *errContainerConfig
	require.ErrorAs(t, err, &cfgErr, "missing key: %v, want errContainerConfig", err)
	want := `env X of container "c": couldn't find key nope in Secret ns/certs`
	require.Equal(t, want, err.Error(), "message %q, want %q", err, want)
}

func TestContainerArgvReplacesTheEntrypointWithTheMappedBinary(t *testing.T) {
	env := []string{"PORT=9443", "NS=dynamo"}
	c := &corev1.Container{Command: []string{"/manager", "--leader-elect"}, Args: []string{"--webhook-port=$(PORT)", "--ns=$(NS)", "--raw=$$(NS)"}}
	got := containerArgv("/bin/op", c, env)
	want := []string{"/bin/op", "--leader-elect", "--webhook-port=9443", "--ns=dynamo", "--raw=$(NS)"}
	require.True(t, slices.Equal(got, want), "argv = %q, want %q", got, want)
	got = containerArgv("/bin/op", &corev1.Container{Args: []string{"a"}}, nil)
	require.True(t, slices.Equal(got, []string{"/bin/op", "a"}), "argv without command = %q", got)
}

func TestContainerEnvCoverDirIsARuntimeDefault(t *testing.T) {
	withCover, err := containerEnv(context.Background(), testObjects(), volumePod(), &corev1.Container{Name: "c"}, nil, apiEndpoint{}, "/cov")
	require.NoError(t, err)
	assert.Contains(t, withCover, "GOCOVERDIR=/cov")

	own := &corev1.Container{Name: "c", Env: []corev1.EnvVar{{Name: "GOCOVERDIR", Value: "/own"}}}
	overridden, err := containerEnv(context.Background(), testObjects(), volumePod(), own, nil, apiEndpoint{}, "/cov")
	require.NoError(t, err)
	assert.Contains(t, overridden, "GOCOVERDIR=/own", "the container's own env wins over the runtime default")
	assert.NotContains(t, overridden, "GOCOVERDIR=/cov")

	without, err := containerEnv(context.Background(), testObjects(), volumePod(), &corev1.Container{Name: "c"}, nil, apiEndpoint{}, "")
	require.NoError(t, err)
	for _, kv := range without {
		assert.NotContains(t, kv, "GOCOVERDIR", "no cover dir configured, yet the container got %q", kv)
	}
}
