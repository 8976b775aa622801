package target

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
)

// servingSecret is the name of the Secret gauntlet's chart keeps the serving certificate in.
const servingSecret = "webhook-server-cert" //nolint:gosec // G101: a Secret's name, not a credential

func TestServedByReadsGauntletsChart(t *testing.T) {
	objs, err := chart.Render("dynamo", "dynamo-system", nil)
	require.NoError(t, err)
	s, err := ServedBy(objs, "dynamo-system", Names{Secret: servingSecret})
	require.NoError(t, err)
	validating, mutating := s.Configurations()
	assert.Equal(t, []string{"dynamo-validating"}, validating)
	assert.Equal(t, []string{"dynamo-mutating"}, mutating)
	assert.Len(t, s.Webhooks, 6)
	assert.Contains(t, s.Webhooks, Webhook{Name: "vdynamomodel.nvidia.com", Configuration: "dynamo-validating", Path: "/validate-nvidia-com-v1alpha1-dynamomodel", FailurePolicy: admissionregistrationv1.Fail, TimeoutSeconds: 10})
	s.Webhooks = nil
	assert.Equal(t, Served{Namespace: "dynamo-system", Service: "dynamo-webhook-service", ServicePort: 443, Deployment: "dynamo-operator", Replicas: 1,
		Container: "operator", ContainerPort: 9443, Secret: servingSecret, ConversionCRDs: []string{"dynamographdeploymentrequests.nvidia.com"},
		ReadinessPath: "/readyz", ReadinessPort: 8081}, s)
	assert.Equal(t, "dynamo-webhook-service.dynamo-system.svc", s.ServiceHost())
}

func TestServedByReadsTheMountedSecretAndChecksTheNamedOne(t *testing.T) {
	objs, err := chart.Render("dynamo", "dynamo-system", map[string]any{"webhook": map[string]any{"certManager": map[string]any{"enabled": true}}})
	require.NoError(t, err)
	s, err := ServedBy(objs, "dynamo-system", Names{})
	require.NoError(t, err)
	assert.Equal(t, servingSecret, s.Secret, "the Secret the serving container mounts")

	_, err = ServedBy(objs, "dynamo-system", Names{Secret: "other"})
	require.EqualError(t, err, "names.secret other is not mounted by container operator of Deployment dynamo-operator (it mounts: webhook-server-cert)")

	objs, err = chart.Render("dynamo", "dynamo-system", nil)
	require.NoError(t, err)
	_, err = ServedBy(objs, "dynamo-system", Names{})
	require.EqualError(t, err, "container operator of Deployment dynamo-operator mounts no Secret (it reads its certificate some other way): set names.secret to the Secret holding it")
	_, err = ServedBy(objs, "dynamo-system", Names{Deployment: "elsewhere", Secret: servingSecret})
	require.EqualError(t, err, "names.deployment elsewhere is not behind Service dynamo-webhook-service (those behind it: dynamo-operator)")
}

func TestEntrypointsAreWhatTheChartsCommandsName(t *testing.T) {
	objs, err := chart.Render("dynamo", "dynamo-system", nil)
	require.NoError(t, err)
	got, err := Entrypoints(objs)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"dynamo-operator:0.1.0": ""}, got, "the operator runs its image's entrypoint")

	twice := []*unstructured.Unstructured{
		{Object: map[string]any{"kind": "Deployment", "metadata": map[string]any{"name": "a"}, "spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"initContainers": []any{map[string]any{"image": "x:1", "command": []any{"/crd-apply"}}},
			"containers":     []any{map[string]any{"image": "x:1", "command": []any{"/manager", "--flag"}}},
		}}}}},
	}
	_, err = Entrypoints(twice)
	assert.EqualError(t, err, `Deployment a runs image x:1 as "/manager", another container as "/crd-apply": one binary cannot be both`)
}
