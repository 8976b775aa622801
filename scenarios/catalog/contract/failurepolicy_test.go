package contract

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

const (
	fail   = admissionregistrationv1.Fail
	ignore = admissionregistrationv1.Ignore
)

// The webhooks of a target: a mutating one documented Fail called before the validating ones.
var documented = []target.Webhook{
	{Name: "m.example.com", Mutating: true, FailurePolicy: fail},
	{Name: "v.example.com", FailurePolicy: fail},
	{Name: "vi.example.com", FailurePolicy: ignore},
	{Name: "mi.example.com", Mutating: true, FailurePolicy: ignore},
}

func webhook(name string) probed {
	for _, w := range documented {
		if w.Name == name {
			p := target.Probe{Webhook: name, Admitted: "ok.yaml"}
			if w.Mutating {
				p.Patch = `[{"op": "add", "path": "/metadata/labels/owner", "value": "x"}]`
			} else {
				p.Denied = &target.Denial{Object: "bad.yaml", Message: "no"}
			}
			return probed{Webhook: w, Probe: p}
		}
	}
	panic(name)
}

func failedCall(name string) sent {
	return sent{err: errors.New(`Internal error occurred: failed calling webhook "` + name + `": failed to call webhook: Post "https://svc.ns.svc:443/x": no endpoints available for service "svc"`)}
}

func admitted(labels map[string]any) sent {
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "p"}}
	if labels != nil {
		obj["metadata"].(map[string]any)["labels"] = labels
	}
	return sent{got: &unstructured.Unstructured{Object: obj}}
}

func TestJudgeDownFailRefusedByItsOwnFailedCallHoldsAndQuotesTheAPIServer(t *testing.T) {
	seen, ok := judgeDown(webhook("v.example.com"), failedCall("v.example.com"), documented)
	assert.True(t, ok)
	assert.Contains(t, seen, `refused: Internal error occurred: failed calling webhook "v.example.com"`)
}

func TestJudgeDownFailAdmittedFails(t *testing.T) {
	seen, ok := judgeDown(webhook("v.example.com"), admitted(nil), documented)
	assert.False(t, ok)
	assert.Equal(t, "admitted", seen)
}

func TestJudgeDownRefusedFirstByAnotherFailWebhookHoldsAndSaysSo(t *testing.T) {
	seen, ok := judgeDown(webhook("v.example.com"), failedCall("m.example.com"), documented)
	assert.True(t, ok)
	assert.Contains(t, seen, "refused first by webhook m.example.com (failurePolicy Fail), so v.example.com's own policy does not show with this probe")
}

func TestJudgeDownRefusedByAWebhookDocumentedIgnoreFails(t *testing.T) {
	seen, ok := judgeDown(webhook("v.example.com"), failedCall("mi.example.com"), documented)
	assert.False(t, ok)
	assert.Contains(t, seen, "refused by webhook mi.example.com, whose chart documents failurePolicy Ignore")
}

func TestJudgeDownIgnoreRefusedByItsOwnFailedCallFails(t *testing.T) {
	seen, ok := judgeDown(webhook("vi.example.com"), failedCall("vi.example.com"), documented)
	assert.False(t, ok)
	assert.Contains(t, seen, `refused: Internal error occurred: failed calling webhook "vi.example.com"`)
}

func TestJudgeDownIgnoreValidatingAdmittedHolds(t *testing.T) {
	seen, ok := judgeDown(webhook("vi.example.com"), admitted(nil), documented)
	assert.True(t, ok)
	assert.Equal(t, "admitted without its judgement", seen)
}

func TestJudgeDownIgnoreMutatingAdmittedWithoutThePatchHolds(t *testing.T) {
	seen, ok := judgeDown(webhook("mi.example.com"), admitted(nil), documented)
	assert.True(t, ok)
	assert.Equal(t, "admitted without its patch", seen)
}

func TestJudgeDownIgnoreMutatingAdmittedWithThePatchFails(t *testing.T) {
	seen, ok := judgeDown(webhook("mi.example.com"), admitted(map[string]any{"owner": "x"}), documented)
	assert.False(t, ok)
	assert.Contains(t, seen, "admitted with its patch")
}

func TestJudgeDownADenialIsNotAFailedCall(t *testing.T) {
	seen, ok := judgeDown(webhook("vi.example.com"), sent{err: errors.New(`admission webhook "vi.example.com" denied the request: no`)}, documented)
	assert.False(t, ok)
	assert.Contains(t, seen, "refused, but not for a failed webhook call")
}

func TestJudgeDownAFailedCallToAnUnknownWebhookFails(t *testing.T) {
	seen, ok := judgeDown(webhook("vi.example.com"), failedCall("other.example.org"), documented)
	assert.False(t, ok)
	assert.Contains(t, seen, "refused by webhook other.example.org, not one the target's chart registers")
}
