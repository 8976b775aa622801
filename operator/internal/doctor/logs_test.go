package doctor

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Log lines as the operator writes them (controller-runtime's zap, production encoder).
const (
	logRegistering = `{"level":"info","ts":"2026-01-01T00:00:01Z","logger":"webhook","msg":"Registering validation webhooks","kinds":["DynamoComponentDeployment","DynamoGraphDeployment","DynamoModel","DynamoGraphDeploymentRequest"]}`
	logStarting    = `{"level":"info","ts":"2026-01-01T00:00:01Z","logger":"controller-runtime.webhook","msg":"Starting webhook server"}`
	logCertRBAC    = `{"level":"error","ts":"2026-01-01T00:00:01Z","logger":"cert-controller","msg":"cert-controller: forbidden by RBAC; grant the operator's ServiceAccount the chart's cert-controller permissions; retrying","error":"creating Secret logs-3/webhook-server-cert: secrets is forbidden"}`
	logWaiting     = `{"level":"info","ts":"2026-01-01T00:00:01Z","logger":"setup","msg":"waiting for the webhook serving certificate","mode":"automatic"}`
)

// TestOperatorLogs reads Pod logs through the API server's pods/log, which the API server
// proxies to the test kubelet.
func TestOperatorLogs(t *testing.T) {
	cases := []struct {
		name string
		// pods maps a Pod name suffix to its log; a Pod with log "-" is Pending.
		pods    map[string]string
		ok      bool
		cause   []string
		details []string
	}{
		{name: "both documented lines", pods: map[string]string{"a": logWaiting + "\n" + logRegistering + "\n" + logStarting + "\n"}, ok: true,
			details: []string{"pod logs-0-operator-a: both lines present"}},
		{name: "server not started", pods: map[string]string{"a": logWaiting + "\n" + logRegistering + "\n"},
			cause: []string{`pod logs-1-operator-a lacks "Starting webhook server"`, "has not finished starting"}},
		{name: "stuck before registration", pods: map[string]string{"a": logWaiting + "\n"},
			cause:   []string{`lacks "Registering validation webhooks" and "Starting webhook server"`},
			details: []string{"pod logs-2-operator-a last log line: " + logWaiting}},
		{name: "T10 cert-controller errors are quoted", pods: map[string]string{"a": logWaiting + "\n" + logCertRBAC + "\n"},
			details: []string{"operator log: " + logCertRBAC}},
		{name: "one of two replicas lacks the lines", pods: map[string]string{"a": logRegistering + "\n" + logStarting + "\n", "b": logWaiting + "\n"},
			cause: []string{`pod logs-4-operator-b lacks "Registering validation webhooks" and "Starting webhook server"`}},
		{name: "no running Pod", pods: map[string]string{"a": "-"},
			cause: []string{"Deployment logs-5/logs-5-operator has no running Pod to read logs from"}, details: []string{"pod logs-5-operator-a: phase Pending, ready false"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r := newRelease(t)
			r.name, r.namespace = fmt.Sprintf("logs-%d", i), fmt.Sprintf("logs-%d", i)
			var objs []client.Object
			for _, o := range r.objects(t) {
				switch o.(type) {
				case *corev1.ServiceAccount, *appsv1.Deployment:
					objs = append(objs, o)
				}
			}
			for suffix, log := range tc.pods {
				p := r.pod()
				p.Name = r.deployment() + "-" + suffix
				if log == "-" {
					p.Status = corev1.PodStatus{Phase: corev1.PodPending}
				} else {
					kubelet.serve(r.namespace, p.Name, "operator", func() string { return log })
				}
				objs = append(objs, p)
			}
			for _, o := range append([]client.Object{namespaceObject(r.namespace)}, objs...) {
				apply(ctx, t, env.Client, o)
			}
			d, err := New(env.Config, Options{Release: r.name, Namespace: r.namespace})
			require.NoError(t, err)
			report := d.run(ctx, checksByID(t, CheckDeployment, CheckLogs))
			res, details := requireResult(t, report, CheckLogs, tc.details)
			if tc.ok {
				require.Equal(t, StatusPass, res.Status, "cause: %s\ndetails:\n%s", res.Cause, details)
				return
			}
			requireOneRoot(t, report, CheckLogs, "", tc.cause, []string{fmt.Sprintf("kubectl -n %s logs deployment/%s-operator", r.namespace, r.name)})
		})
	}
}

// TestOperatorLogsNeedTheDeployment: without the Deployment there are no Pods to find, so
// the log check does not run.
func TestOperatorLogsNeedTheDeployment(t *testing.T) {
	d, err := New(env.Config, Options{Release: "nothing-here", Namespace: "default"})
	require.NoError(t, err)
	report := d.run(context.Background(), checksByID(t, CheckDeployment, CheckLogs))
	res, _ := report.Find(CheckLogs)
	assert.Equal(t, StatusSkipped, res.Status)
	assert.Equal(t, []string{CheckDeployment}, res.DependsOn)
}
