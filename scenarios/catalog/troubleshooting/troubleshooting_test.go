package troubleshooting

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/jsonlog"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

func TestContainsInOrder(t *testing.T) {
	text := `Internal error occurred: failed calling webhook "v.nvidia.com": failed to call webhook: Post "https://s.ns.svc:443/x": dial tcp 127.0.0.1:443: connect: connection refused`
	parts := []*regexp.Regexp{failedCallPrefix, dialTCP, connectionRefused}
	assert.True(t, containsInOrder(text, parts), "expected %s to match %q", describeParts(parts), text)
	assert.False(t, containsInOrder(text, []*regexp.Regexp{connectionRefused, dialTCP}), "parts out of order must not match")
}

func TestLogEntryHoldsWhatTheScenariosFind(t *testing.T) {
	raw := strings.Join([]string{
		`{"level":"info","logger":"webhook","msg":"validate create","kind":"DynamoGraphDeployment","name":"graph","namespace":"t1","result":"denied"}`,
		`{"level":"error","logger":"cert-controller","msg":"cert-controller: failed","error":"secrets is forbidden"}`,
	}, "\n")
	var got []logEntry
	require.NoError(t, jsonlog.Read(strings.NewReader(raw), func(e logEntry) { got = append(got, e) }))
	require.Len(t, got, 2, "expected 2 entries, saw %d: %+v", len(got), got)
	logs := podLogs{"pod": got}
	n := len(logs.find(admissionLine("validate create", "t1", "graph")))
	assert.Equal(t, 1, n, "expected the validate create line for t1/graph, saw %d", n)
	assert.Equal(t, "cert-controller", got[1].Logger, "second entry: %+v", got[1])
	assert.Equal(t, "secrets is forbidden", got[1].Error, "second entry: %+v", got[1])
}

func TestDoctorArgsPortForwardOnlyWithoutTheServiceNetwork(t *testing.T) {
	d := doctorTarget{release: "dynamo", namespace: "dynamo-system", testNamespace: "t1-abc"}
	reachable := strings.Join(d.args("/k", true), " ")
	assert.NotContains(t, reachable, "--connect", "with the Service network reachable from here the doctor keeps its default: %s", reachable)
	unreachable := d.args("/k", false)
	got := unreachable[len(unreachable)-1]
	assert.Equal(t, "--connect=port-forward", got, "without the Service network the doctor must port-forward: %v", unreachable)
	assert.Contains(t, strings.Join(unreachable, " "), "--test-namespace t1-abc", "args: %v", unreachable)
}

// T8's expectation follows the API server: v1.37 resolves a webhook's Service on every call.
func TestResolvesServicePerRequest(t *testing.T) {
	for v, want := range map[string]bool{"v1.35.4": false, "v1.36.3": false, "v1.37.0": true, "v1.37.2": true, "v1.38.0-alpha.1": true} {
		if got := suite.ResolvesWebhookServicePerRequest(v); got != want {
			t.Errorf("ResolvesWebhookServicePerRequest(%s) = %v, want %v", v, got, want)
		}
	}
}
