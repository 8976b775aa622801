package contract

import (
	"crypto/x509"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/doctor"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

func TestJudgeFailedCallT9WantsTheDeadlineInTheRefusal(t *testing.T) {
	slow := sent{err: errors.New(`Internal error occurred: failed calling webhook "v.example.com": failed to call webhook: Post "https://svc.ns.svc:443/x?timeout=3s": context deadline exceeded`)}
	_, ok := judgeFailedCall(webhook("v.example.com"), slow, documented, slowCall)
	assert.True(t, ok)
	handshake := sent{err: errors.New(`Internal error occurred: failed calling webhook "v.example.com": failed to call webhook: Post "https://svc.ns.svc:443/x?timeout=10s": net/http: TLS handshake timeout`)}
	_, ok = judgeFailedCall(webhook("v.example.com"), handshake, documented, slowCall)
	assert.True(t, ok, "the API server's transport gives up on a handshake after 10s, before a timeoutSeconds of 10")
	seen, ok := judgeFailedCall(webhook("v.example.com"), failedCall("v.example.com"), documented, slowCall)
	assert.False(t, ok, "a webhook with no endpoints is T6, not a slow one")
	assert.Contains(t, seen, "refused, but without `context deadline exceeded|net/http: TLS handshake timeout`")
	_, ok = judgeFailedCall(webhook("vi.example.com"), admitted(nil), documented, slowCall)
	assert.True(t, ok, "Ignore: admitted unjudged once the call timed out")
}

func TestJudgeDiagnosisWithAScenarioWantsItDocumentedSo(t *testing.T) {
	rep := func(scenario string) doctor.Report {
		return doctor.Report{ExitCode: doctor.ExitUnhealthy, Results: []doctor.Result{
			{ID: "serving-certificate", Status: doctor.StatusFail, Scenario: scenario},
			{ID: "admission-dry-run", Status: "consequence"},
		}}
	}
	assert.Empty(t, judgeDiagnosis(rep("T9"), "serving-certificate", "T9"))
	assert.Contains(t, judgeDiagnosis(rep("T3"), "serving-certificate", "T9"), "root causes [serving-certificate (T3)]",
		"the right check for another fault is not T9's diagnosis")
	assert.Contains(t, judgeDiagnosis(rep(""), "serving-certificate", "T9"), "root causes [serving-certificate]")
}

func TestLongestTimeoutDefaultsAsTheAPIServerDoes(t *testing.T) {
	assert.Equal(t, 3*time.Second, longestTimeout([]target.Webhook{{TimeoutSeconds: 1}, {TimeoutSeconds: 3}}))
	assert.Equal(t, 10*time.Second, longestTimeout([]target.Webhook{{TimeoutSeconds: 1}, {}}), "unset is the API server's 10s")
}

func TestWebhookPortIsTheOneTheWebhooksCall(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "metrics", Port: 8080}, {Name: "https", Port: 443, TargetPort: intstr.FromString("webhook-server")},
	}}}
	p, err := webhookPort(svc, 443)
	require.NoError(t, err)
	assert.Equal(t, "https", p.Name)
	_, err = webhookPort(svc, 9443)
	assert.ErrorContains(t, err, "the webhook Service ns/svc has no port 9443, the one its webhooks call")
}

func TestPodAddressesAreTheReadyServingPods(t *testing.T) {
	pod := func(ip string, ready corev1.ConditionStatus, deleting bool) corev1.Pod {
		p := corev1.Pod{Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return p
	}
	got := podAddresses([]corev1.Pod{
		pod("10.244.0.9", corev1.ConditionTrue, false),
		pod("10.244.0.7", corev1.ConditionTrue, false),
		pod("10.244.0.8", corev1.ConditionFalse, false),
		pod("10.244.0.6", corev1.ConditionTrue, true),
		pod("", corev1.ConditionTrue, false),
		pod("fd00::5", corev1.ConditionTrue, false),
	}, 8443)
	assert.Equal(t, []string{"10.244.0.7:8443", "10.244.0.9:8443", "[fd00::5]:8443"}, got)
}

func TestDelayProxyDeploymentServesTheServicesTargetPort(t *testing.T) {
	named := corev1.ServicePort{Port: 443, TargetPort: intstr.FromString("webhook-server")}
	d := delayProxyDeployment("gatekeeper-system", "gauntlet-delay-proxy:dev", 5*time.Second, named, 8443, []string{"10.244.0.7:8443", "10.244.0.9:8443"})
	assert.Equal(t, "gatekeeper-system", d.Namespace)
	assert.Equal(t, map[string]string{delayProxyLabel: delayProxyValue}, d.Spec.Template.Labels, "the labels T9's selector requires")
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "gauntlet-delay-proxy:dev", c.Image)
	assert.Equal(t, []string{"--delay=5s", "--route=8443=10.244.0.7:8443,10.244.0.9:8443"}, c.Args)
	assert.Equal(t, []corev1.ContainerPort{{Name: "webhook-server", ContainerPort: 8443, Protocol: corev1.ProtocolTCP}}, c.Ports,
		"a named targetPort resolves only to a container port of that name")
	numbered := delayProxyDeployment("ns", "img", time.Second, corev1.ServicePort{Port: 443, TargetPort: intstr.FromInt32(9443)}, 9443, []string{"a:1"})
	assert.Empty(t, numbered.Spec.Template.Spec.Containers[0].Ports[0].Name)
}

func TestJudgeLateAnswerWantsTheWebhooksOwnCertificateAfterTheDelay(t *testing.T) {
	own := &x509.Certificate{Raw: []byte("own"), SerialNumber: big.NewInt(1)}
	other := &x509.Certificate{Raw: []byte("other"), SerialNumber: big.NewInt(2)}
	delay := 12 * time.Second
	seen, ok := judgeLateAnswer(delay, 12300*time.Millisecond, own, own, nil)
	assert.True(t, ok, seen)
	assert.Equal(t, "the webhook's own certificate (serial 1) after 12.3s", seen)
	seen, ok = judgeLateAnswer(delay, 27*time.Second, own, nil, errors.New("TLS handshake with Service ns/svc: context deadline exceeded"))
	assert.False(t, ok, "a proxy that never forwards is a dead end, not T9")
	assert.Equal(t, "no answer after 27s: TLS handshake with Service ns/svc: context deadline exceeded", seen)
	seen, ok = judgeLateAnswer(delay, 20*time.Millisecond, own, own, nil)
	assert.False(t, ok, "an answer at once means the webhook is not slow")
	assert.Contains(t, seen, "sooner than the delay")
	seen, ok = judgeLateAnswer(delay, 13*time.Second, own, other, nil)
	assert.False(t, ok, "another server's certificate is not the webhook's answer")
	assert.Contains(t, seen, "serial 2")
}
