package target

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
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

// deployment is a Deployment whose pod template runs these init containers and containers.
func deployment(name string, initContainers, containers []any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"kind": "Deployment", "metadata": map[string]any{"name": name}, "spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"initContainers": initContainers, "containers": containers,
	}}}}}
}

func TestEntrypointsAreWhatTheChartsCommandsName(t *testing.T) {
	tg := &Target{Source: Source{Binaries: []Binary{{Image: "dynamo-operator:0.1.0", Package: "./cmd/dynamo-operator"}}}}
	objs, err := chart.Render("dynamo", "dynamo-system", nil)
	require.NoError(t, err)
	got, err := tg.Entrypoints(map[string]cluster.Image{"dynamo-operator:0.1.0": {Binary: "/cache/dynamo-operator"}}, objs)
	require.NoError(t, err)
	assert.Equal(t, "/dynamo-operator", got["dynamo-operator:0.1.0"].Entrypoint, "a chart naming no command: the image holds the program at /<its name>")

	twoPrograms := []*unstructured.Unstructured{deployment("a",
		[]any{map[string]any{"image": "x:1", "command": []any{"/crd-apply"}}},
		[]any{map[string]any{"image": "x:1", "command": []any{"/manager", "--flag"}}})}
	declared := map[string]cluster.Image{"x:1": {Binary: "/cache/manager", Programs: map[string]string{"/crd-apply": "/cache/crd-apply"}}}
	tg = &Target{Source: Source{Binaries: []Binary{{Image: "x:1", Package: "."}}}, file: "target.yaml", lines: map[string]int{"source.binaries[0]": 7}}
	got, err = tg.Entrypoints(declared, twoPrograms)
	require.NoError(t, err)
	assert.Equal(t, "/manager", got["x:1"].Entrypoint, "the one path beyond the declared programs is the entrypoint's")

	_, err = tg.Entrypoints(map[string]cluster.Image{"x:1": {Binary: "/cache/manager"}}, twoPrograms)
	assert.EqualError(t, err, `target.yaml:7: field source.binaries[0].path: the chart runs image x:1 as /crd-apply and /manager: give the entrypoint's path here, and each other program under programs`)
}

func TestAStandInIsWhateverTheChartRunsItsImageAs(t *testing.T) {
	tg := &Target{Source: Source{StandIns: []StandIn{{Image: "alpine/k8s:1.30", Runs: workspace.StandInExitAtOnce}, {Image: "proxy:1", Runs: workspace.StandInUntilStopped}}}}
	objs := []*unstructured.Unstructured{deployment("hook", nil, []any{
		map[string]any{"image": "alpine/k8s:1.30", "command": []any{"/bin/sh", "-c", "kubectl apply -f /crds"}},
		map[string]any{"image": "alpine/k8s:1.30", "command": []any{"kubectl", "version"}},
		map[string]any{"image": "proxy:1", "args": []any{"--upstream=http://127.0.0.1:8080"}},
	})}
	standIn := cluster.Image{Binary: "/bin/gauntlet-standin"}
	got, err := tg.Entrypoints(map[string]cluster.Image{"alpine/k8s:1.30": standIn, "proxy:1": standIn}, objs)
	require.NoError(t, err)
	assert.Equal(t, cluster.Image{Binary: "/bin/gauntlet-standin", Entrypoint: "/bin/sh", Programs: map[string]string{"/usr/local/bin/kubectl": "/bin/gauntlet-standin"}},
		got["alpine/k8s:1.30"], "the stand-in at every path the chart's commands name, a bare name on the default PATH")
	assert.Equal(t, cluster.Image{Binary: "/bin/gauntlet-standin", Entrypoint: "/gauntlet-standin", Programs: map[string]string{}},
		got["proxy:1"], "a chart naming no command runs the image's entrypoint, the stand-in")
}
