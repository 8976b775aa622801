package chart_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestOperatorArgs(t *testing.T) {
	cases := []struct {
		name      string
		namespace string
		values    string
		want      []string
		absent    []string
	}{
		{
			name:      "defaults",
			namespace: testNamespace,
			want: []string{
				"--metrics-bind-address=:8443",
				"--health-probe-bind-address=:8081",
				"--webhook-port=9443",
				"--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs",
				"--webhook-cert-mode=automatic",
				"--webhook-cert-secret=webhook-server-cert",
				"--webhook-service=dynamo-webhook-service",
				"--validating-webhook-configuration=dynamo-validating",
				"--mutating-webhook-configuration=dynamo-mutating",
				"--conversion-crd=" + dgdrCRD,
				"--cert-ca-validity=87600h",
				"--cert-server-validity=87600h",
				"--cert-lookahead=2160h",
				"--cert-check-interval=30s",
				"--lease-duration=25s",
				"--lease-renew-interval=10s",
				"--lease-grace-period=5s",
				"--webhook-drain-timeout=2s",
				"--zap-log-level=info",
				"--zap-time-encoding=rfc3339nano",
			},
			absent: []string{"--restrict-to-namespace", "--dgdr-default-image", "--webhook-latency-injection"},
		},
		{
			name:      "values flow into the flags",
			namespace: testNamespace,
			values: `
logLevel: debug
dgdr: {defaultImage: "registry.example/dynamo/profiler:1.2"}
drainTimeoutSeconds: 100
webhook:
  port: 10443
  certificateSecret: {name: my-cert}
  certificateValidity: {ca: 1000h, server: 100h, lookAhead: 10h}
  checkInterval: 5s
namespaceRestriction:
  lease: {duration: 3s, renewInterval: 1s, gracePeriod: 2s}`,
			want: []string{
				"--webhook-port=10443",
				"--webhook-cert-secret=my-cert",
				"--cert-ca-validity=1000h",
				"--cert-server-validity=100h",
				"--cert-lookahead=10h",
				"--cert-check-interval=5s",
				"--lease-duration=3s",
				"--lease-renew-interval=1s",
				"--lease-grace-period=2s",
				"--dgdr-default-image=registry.example/dynamo/profiler:1.2",
				"--webhook-drain-timeout=100s",
				"--zap-log-level=debug",
			},
		},
		{
			name:      "restricted",
			namespace: "team-a",
			values:    `{namespaceRestriction: {enabled: true}, crds: {install: false}}`,
			want: []string{
				"--restrict-to-namespace=team-a",
				"--validating-webhook-configuration=dynamo-validating-team-a",
				"--mutating-webhook-configuration=dynamo-mutating-team-a",
			},
			absent: []string{"--conversion-crd"},
		},
		{
			name:      "cert-manager mode has no generation flags",
			namespace: testNamespace,
			values:    `{webhook: {certManager: {enabled: true}}}`,
			want:      []string{"--webhook-cert-mode=cert-manager", "--cert-check-interval=30s"},
			absent:    []string{"--cert-ca-validity", "--cert-server-validity", "--cert-lookahead"},
		},
		{
			name:      "T9 test-only latency injection",
			namespace: testNamespace,
			values:    `{webhook: {latencyInjection: 3s}}`,
			want:      []string{"--webhook-latency-injection=3s"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := render(t, tc.namespace, tc.values)
			args := operatorArgs(t, o)
			for _, want := range tc.want {
				assert.Contains(t, args, want)
			}
			for _, absent := range tc.absent {
				for _, arg := range args {
					assert.False(t, strings.HasPrefix(arg, absent), "unexpected operator arg %s", arg)
				}
			}
			if strings.Contains(tc.values, "port: 10443") {
				deploy := get[appsv1.Deployment](t, o, "Deployment", "dynamo-operator")
				assert.Equal(t, int32(10443), deploy.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort)
			}
		})
	}
}

func TestDeployment(t *testing.T) {
	o := render(t, testNamespace, `
replicas: 2
image: {repository: registry.example/dynamo-operator, pullPolicy: Always}
resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 256Mi}}`)
	deploy := get[appsv1.Deployment](t, o, "Deployment", "dynamo-operator")
	selector := map[string]string{"app.kubernetes.io/name": "dynamo-operator", "app.kubernetes.io/instance": "dynamo"}

	assert.Equal(t, int32(2), ptrValue(deploy.Spec.Replicas))
	assert.Equal(t, selector, deploy.Spec.Selector.MatchLabels)
	for k, v := range selector {
		assert.Equal(t, v, deploy.Labels[k], "Deployment label %s", k)
		assert.Equal(t, v, deploy.Spec.Template.Labels[k], "pod label %s", k)
	}
	assert.Equal(t, "dynamo-operator", deploy.Spec.Template.Spec.ServiceAccountName)

	c := deploy.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "registry.example/dynamo-operator:0.1.0", c.Image, "tag defaults to the chart's appVersion")
	assert.Equal(t, corev1.PullAlways, c.ImagePullPolicy)
	assert.Equal(t, "100m", c.Resources.Requests.Cpu().String())
	assert.Equal(t, "256Mi", c.Resources.Limits.Memory().String())

	env := map[string]string{}
	for _, e := range c.Env {
		require.NotNil(t, e.ValueFrom, "env %s comes from the downward API", e.Name)
		env[e.Name] = e.ValueFrom.FieldRef.FieldPath
	}
	assert.Equal(t, map[string]string{"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"}, env)

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	assert.Equal(t, map[string]int32{"webhook-server": 9443, "metrics": 8443, "health": 8081}, ports)

	require.NotNil(t, c.ReadinessProbe)
	require.NotNil(t, c.LivenessProbe)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, "health", c.ReadinessProbe.HTTPGet.Port.String())
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "health", c.LivenessProbe.HTTPGet.Port.String())

	require.NotNil(t, deploy.Spec.Strategy.RollingUpdate)
	assert.Equal(t, "0", deploy.Spec.Strategy.RollingUpdate.MaxUnavailable.String(), "a ready pod keeps serving webhooks during a rollout")

	t.Run("the grace period covers the preStop delay and the drain", func(t *testing.T) {
		spec := deploy.Spec.Template.Spec
		require.NotNil(t, spec.TerminationGracePeriodSeconds)
		assert.Equal(t, int64(5+2+15), *spec.TerminationGracePeriodSeconds, "shutdownDelaySeconds + drainTimeoutSeconds + 15")
		longer := get[appsv1.Deployment](t, render(t, testNamespace, `{shutdownDelaySeconds: 10, drainTimeoutSeconds: 100}`), "Deployment", "dynamo-operator")
		assert.Equal(t, int64(10+100+15), *longer.Spec.Template.Spec.TerminationGracePeriodSeconds)
	})

	t.Run("image tag value", func(t *testing.T) {
		deploy := get[appsv1.Deployment](t, render(t, testNamespace, `{image: {tag: v2.0.1}}`), "Deployment", "dynamo-operator")
		assert.Equal(t, "dynamo-operator:v2.0.1", deploy.Spec.Template.Spec.Containers[0].Image)
	})
}

func TestServices(t *testing.T) {
	o := render(t, testNamespace, "")
	deploy := get[appsv1.Deployment](t, o, "Deployment", "dynamo-operator")

	svc := get[corev1.Service](t, o, "Service", "dynamo-webhook-service")
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(443), svc.Spec.Ports[0].Port)
	assert.Equal(t, "webhook-server", svc.Spec.Ports[0].TargetPort.String())
	assert.Equal(t, deploy.Spec.Selector.MatchLabels, svc.Spec.Selector, "the webhook Service selects the operator pods")

	metrics := get[corev1.Service](t, o, "Service", "dynamo-metrics")
	require.Len(t, metrics.Spec.Ports, 1)
	assert.Equal(t, "metrics", metrics.Spec.Ports[0].TargetPort.String())
	assert.Equal(t, int32(8443), metrics.Spec.Ports[0].Port)
	assert.Equal(t, "https", ptrValue(metrics.Spec.Ports[0].AppProtocol), "/metrics is served over HTTPS")

	assert.Nil(t, render(t, testNamespace, `{metrics: {service: {enabled: false}}}`).find("Service", "dynamo-metrics"))
}
