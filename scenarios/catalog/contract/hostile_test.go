package contract

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/rawhttp"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

func seenOn(p *hostilePath, in hostileInputDef, a rawhttp.Answer) hostileSeen {
	return hostileSeen{input: in, path: p, route: "through Service ns/svc:443", a: a}
}

var (
	admissionPath  = &hostilePath{path: "/validate"}
	conversionPath = &hostilePath{path: "/convert", conversion: true}
	garbage        = hostileInputDef{name: "binary garbage", bound: answerBound}
	textPlain      = hostileInputDef{name: "Content-Type text/plain", bound: answerBound, wellFormed: true}
)

func TestMalformedInputAllowedIsFailingOpen(t *testing.T) {
	s := seenOn(admissionPath, garbage, rawhttp.Answer{Status: http.StatusOK, Body: `{"response":{"uid":"","allowed":true}}`})
	assert.Contains(t, s.judge(), "saw it admitted (allowed: true): HTTP 200")
}

func TestMalformedInputRefusedInAReviewOrByStatusPasses(t *testing.T) {
	inReview := seenOn(admissionPath, garbage, rawhttp.Answer{Status: http.StatusOK, Body: `{"response":{"allowed":false,"status":{"code":400}}}`})
	byStatus := seenOn(admissionPath, garbage, rawhttp.Answer{Status: http.StatusBadRequest, Body: `{"response":{"allowed":true}}`})
	closed := seenOn(admissionPath, garbage, rawhttp.Answer{Err: errors.New("the server closed the connection without an answer")})
	assert.Empty(t, inReview.judge())
	assert.Empty(t, byStatus.judge(), "a non-2xx status is an error to the API server, whatever its body")
	assert.Empty(t, closed.judge())
}

func TestAnAnswerAfterTheBoundFails(t *testing.T) {
	s := seenOn(admissionPath, garbage, rawhttp.Answer{Status: http.StatusBadRequest, Took: answerBound + time.Second})
	assert.Contains(t, s.judge(), "expected an answer or the connection closed within 10s")
}

func TestAMalformedConversionReviewConvertedFails(t *testing.T) {
	s := seenOn(conversionPath, garbage, rawhttp.Answer{Status: http.StatusOK, Body: `{"response":{"uid":"","result":{"status":"Success"}}}`})
	assert.Contains(t, s.judge(), "converted")
}

// A review with only its Content-Type wrong may be judged instead of refused: a mutating
// webhook's patch shows it judged; a validating webhook's probe is its denied object.
func TestAWellFormedReviewAdmittedMustShowItsJudgement(t *testing.T) {
	mutating := &hostilePath{path: "/mutate", judged: &probed{Webhook: target.Webhook{Mutating: true}}}
	validating := &hostilePath{path: "/validate", judged: &probed{}}
	patched := rawhttp.Answer{Status: http.StatusOK, Body: `{"response":{"allowed":true,"patch":"W10="}}`}
	unpatched := rawhttp.Answer{Status: http.StatusOK, Body: `{"response":{"allowed":true}}`}
	assert.Empty(t, seenOn(mutating, textPlain, patched).judge())
	assert.Contains(t, seenOn(mutating, textPlain, unpatched).judge(), "admitted")
	assert.Contains(t, seenOn(validating, textPlain, unpatched).judge(), "admitted")
}

func TestOutcomesGroupWhatEachRouteAndPathSaw(t *testing.T) {
	refused := rawhttp.Answer{Status: http.StatusOK, Body: `{"response":{"allowed":false,"status":{"code":400}}}`, Took: 20 * time.Millisecond}
	paths := []hostilePath{*admissionPath, *conversionPath}
	seen := []hostileSeen{
		{input: garbage, path: &paths[0], route: "A", a: refused},
		{input: garbage, path: &paths[0], route: "B", a: refused},
		{input: garbage, path: &paths[1], route: "A", a: rawhttp.Answer{Status: 400}},
		{input: garbage, path: &paths[1], route: "B", a: rawhttp.Answer{Status: 400}},
		{input: textPlain, path: &paths[0], route: "A", a: rawhttp.Answer{Status: 415, Closed: true}},
		{input: textPlain, path: &paths[0], route: "B", a: rawhttp.Answer{Err: errors.New("read: connection reset by peer")}},
		{input: textPlain, path: &paths[1], route: "A", a: rawhttp.Answer{Status: 415, Closed: true}},
		{input: textPlain, path: &paths[1], route: "B", a: rawhttp.Answer{Status: 415, Closed: true}},
	}
	assert.Equal(t, []string{
		"HTTP 200, AdmissionReview allowed: false (code 400) (slowest 20ms): every admission path on every route",
		"HTTP 400 (slowest 0s): every conversion path on every route",
	}, outcomes(seen, garbage.name, paths, 2))
	assert.Equal(t, []string{
		"HTTP 415, closed (slowest 0s): every conversion path on every route; /validate A",
		"reset without an answer (slowest 0s): /validate B",
	}, outcomes(seen, textPlain.name, paths, 2))
	everywhere := []hostileSeen{{input: garbage, path: &paths[0], route: "A"}, {input: garbage, path: &paths[1], route: "A"}}
	assert.Equal(t, []string{"closed without an answer (slowest 0s): every path and route"}, outcomes(withErr(everywhere), garbage.name, paths, 1))
}

func withErr(seen []hostileSeen) []hostileSeen {
	for i := range seen {
		seen[i].a.Err = errors.New("EOF")
	}
	return seen
}

func TestReplacedOrRestartedNamesGoneNewAndRestartedPods(t *testing.T) {
	pod := func(uid, name string, restarts int32, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "manager", RestartCount: restarts}}
		if restarts > 1 {
			p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}
		}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	before := runsOf([]corev1.Pod{pod("1", "a", 0, false), pod("2", "b", 1, false), pod("3", "c", 0, false), pod("9", "old", 0, true)})
	after := runsOf([]corev1.Pod{pod("1", "a", 0, false), pod("2", "b", 2, false), pod("3", "c", 0, true), pod("4", "d", 0, false)})
	assert.Equal(t, []string{
		"pod b: container manager restarted (restartCount 2, 1 before); its last run ended OOMKilled, exit code 137",
		"pod c (UID 3) is gone or being deleted",
		"pod d (UID 4) is new",
	}, replacedOrRestarted(before, after))
	assert.Empty(t, replacedOrRestarted(before, before))
}

// TestSendOneBoundsTheDial: a dial that never ends held its slot, and every input waiting for
// one, until go test's timeout (W10 on kind, 2026-11-30); connecting is bounded as a handshake is.
func TestSendOneBoundsTheDial(t *testing.T) {
	var deadline time.Time
	var bounded bool
	r := tlsRoute{name: "through Service ns/svc:443", dial: func(ctx context.Context) (net.Conn, error) {
		deadline, bounded = ctx.Deadline()
		return nil, errors.New("connect: connection refused")
	}}
	_, err := sendOne(t.Context(), r, &tls.Config{MinVersion: tls.VersionTLS12}, garbage, admissionPath)
	require.ErrorContains(t, err, "connection refused")
	require.True(t, bounded, "the dial's context has a deadline")
	assert.WithinDuration(t, time.Now().Add(handshakeBound), deadline, time.Second)
}
