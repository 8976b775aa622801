package troubleshooting

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestOverlayMergesWithoutTouchingItsInputs(t *testing.T) {
	base := map[string]any{"webhook": map[string]any{"port": 9443, "failurePolicy": "Fail"}, "replicas": 1}
	over := map[string]any{"webhook": map[string]any{"failurePolicy": "Ignore"}}
	got := overlay(base, over)
	want := map[string]any{"webhook": map[string]any{"port": 9443, "failurePolicy": "Ignore"}, "replicas": 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("overlay: expected %v, saw %v", want, got)
	}
	if base["webhook"].(map[string]any)["failurePolicy"] != "Fail" {
		t.Errorf("overlay changed its base: %v", base)
	}
}

func TestContainsInOrder(t *testing.T) {
	text := `Internal error occurred: failed calling webhook "v.nvidia.com": failed to call webhook: Post "https://s.ns.svc:443/x": dial tcp 127.0.0.1:443: connect: connection refused`
	parts := []*regexp.Regexp{failedCallPrefix, dialTCP, connectionRefused}
	if !containsInOrder(text, parts) {
		t.Errorf("expected %s to match %q", describeParts(parts), text)
	}
	if containsInOrder(text, []*regexp.Regexp{connectionRefused, dialTCP}) {
		t.Errorf("parts out of order must not match")
	}
}

func TestDoctorReportNamesRootCauses(t *testing.T) {
	out := `[
  {"id": "api-server", "title": "reachable", "ok": true, "status": "pass"},
  {"id": "service-endpoints", "title": "endpoints", "ok": false, "status": "fail", "scenario": "T6", "cause": "T6 operator scaled to 0"},
  {"id": "operator-logs", "title": "logs", "ok": false, "status": "consequence", "dependsOn": ["service-endpoints"]}
]`
	rep, err := parseDoctorReport(1, []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.rootNames(); !reflect.DeepEqual(got, []string{"service-endpoints (T6)"}) {
		t.Errorf("root causes: expected [service-endpoints (T6)], saw %v", got)
	}
	if rep.healthy() {
		t.Errorf("a report with a failed check is not healthy")
	}
	if s := rep.String(); !strings.Contains(s, "✗ service-endpoints (T6): T6 operator scaled to 0") || !strings.Contains(s, "operator-logs (consequence of service-endpoints)") {
		t.Errorf("summary: %s", s)
	}
}

func TestDoctorReportHealthyNeedsExitZeroAndEveryCheck(t *testing.T) {
	out := `[{"id": "api-server", "title": "reachable", "ok": true, "status": "pass"}]`
	for code, want := range map[int]bool{0: true, 1: false} {
		rep, err := parseDoctorReport(code, []byte(out))
		if err != nil {
			t.Fatal(err)
		}
		if rep.healthy() != want {
			t.Errorf("exit %d, every check passed: expected healthy=%t", code, want)
		}
	}
	if _, err := parseDoctorReport(0, []byte(`[]`)); err == nil {
		t.Errorf("an empty report must be an error")
	}
}

func TestParseLogKeepsJSONLinesOnly(t *testing.T) {
	raw := strings.Join([]string{
		`{"level":"info","logger":"webhook","msg":"validate create","kind":"DynamoGraphDeployment","name":"graph","namespace":"t1","result":"denied"}`,
		`panic: something`,
		``,
		`{"level":"error","logger":"cert-controller","msg":"cert-controller: failed","error":"secrets is forbidden"}`,
	}, "\n")
	got := parseLog([]byte(raw))
	if len(got) != 2 {
		t.Fatalf("expected 2 entries, saw %d: %+v", len(got), got)
	}
	logs := podLogs{"pod": got}
	if n := len(logs.find(admissionLine("validate create", "t1", "graph"))); n != 1 {
		t.Errorf("expected the validate create line for t1/graph, saw %d", n)
	}
	if got[1].Logger != "cert-controller" || got[1].Error != "secrets is forbidden" {
		t.Errorf("second entry: %+v", got[1])
	}
}

func TestDoctorArgsPortForwardOnlyWithoutTheServiceNetwork(t *testing.T) {
	d := doctorTarget{release: "dynamo", namespace: "dynamo-system", testNamespace: "t1-abc"}
	reachable := strings.Join(d.args("/k", true), " ")
	if strings.Contains(reachable, "--connect") {
		t.Errorf("with the Service network reachable from here the doctor keeps its default: %s", reachable)
	}
	unreachable := d.args("/k", false)
	if got := unreachable[len(unreachable)-1]; got != "--connect=port-forward" {
		t.Errorf("without the Service network the doctor must port-forward: %v", unreachable)
	}
	if !strings.Contains(strings.Join(unreachable, " "), "--test-namespace t1-abc") {
		t.Errorf("args: %v", unreachable)
	}
}
