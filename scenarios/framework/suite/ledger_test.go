package suite

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseWrite(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		ok           bool
		want         write
	}{
		{http.MethodPost, "/apis/nvidia.com/v1alpha1/namespaces/team-a/dynamographdeployments", true,
			write{resource: "dynamographdeployments", namespace: "team-a", collection: true}},
		{http.MethodPut, "/apis/nvidia.com/v1alpha1/namespaces/team-a/dynamographdeployments/g", true,
			write{resource: "dynamographdeployments", namespace: "team-a", name: "g"}},
		{http.MethodDelete, "/apis/nvidia.com/v1beta1/namespaces/team-a/dynamographdeploymentrequests", true,
			write{resource: "dynamographdeploymentrequests", namespace: "team-a", collection: true}},
		{http.MethodDelete, "/api/v1/namespaces/team-a", true, write{namespace: "team-a", namespaceDeleted: true}},
		{http.MethodPut, "/apis/nvidia.com/v1alpha1/namespaces/team-a/dynamographdeployments/g/status", false, write{}},
		{http.MethodPut, "/apis/nvidia.com/v1alpha1/namespaces/team-a/dynamographdeployments", false, write{}},
		{http.MethodPost, "/apis/apps/v1/namespaces/team-a/deployments", false, write{}},
		{http.MethodPost, "/api/v1/namespaces", false, write{}},
	} {
		got, ok := parseWrite(tc.method, tc.path)
		require.Equal(t, tc.ok, ok, "%s %s", tc.method, tc.path)
		if ok {
			assert.Equal(t, tc.want.resource, got.resource, tc.path)
			assert.Equal(t, tc.want.namespace, got.namespace, tc.path)
			assert.Equal(t, tc.want.name, got.name, tc.path)
			assert.Equal(t, tc.want.collection, got.collection, tc.path)
			assert.Equal(t, tc.want.namespaceDeleted, got.namespaceDeleted, tc.path)
		}
	}
}

// The ledger keeps the last written spec of each object per scenario and forgets what the
// scenario deleted: by name, by collection, or with its namespace.
func TestLedgerRecordsLastWriteAndDeletions(t *testing.T) {
	l := newLedger()
	l.begin("T6")
	created, _ := parseWrite(http.MethodPost, "/apis/nvidia.com/v1alpha1/namespaces/t6/dynamographdeployments")
	l.record(created, []byte(`{"metadata":{"name":"a","uid":"1"},"spec":{"services":{"x":{"replicas":1}}}}`))
	l.record(created, []byte(`{"metadata":{"name":"b","uid":"2"},"spec":{}}`))
	updated, _ := parseWrite(http.MethodPut, "/apis/nvidia.com/v1alpha1/namespaces/t6/dynamographdeployments/a")
	l.record(updated, []byte(`{"metadata":{"name":"a","uid":"1"},"spec":{"services":{"x":{"replicas":2}}}}`))
	deleted, _ := parseWrite(http.MethodDelete, "/apis/nvidia.com/v1alpha1/namespaces/t6/dynamographdeployments/b")
	l.record(deleted, nil)

	a := l.entries[ledgerKey{scope: "T6", resource: "dynamographdeployments", namespace: "t6", name: "a"}]
	require.NotNil(t, a)
	assert.JSONEq(t, `{"services":{"x":{"replicas":2}}}`, a.spec, "the last written spec")
	assert.False(t, a.deleted)
	assert.True(t, l.entries[ledgerKey{scope: "T6", resource: "dynamographdeployments", namespace: "t6", name: "b"}].deleted)

	l.end("T6")
	l.begin("T7")
	ns, _ := parseWrite(http.MethodDelete, "/api/v1/namespaces/t6")
	l.record(ns, nil)
	assert.False(t, a.deleted, "another scenario's namespace deletion is not this scenario's")
	l.end("T7")
	l.begin("T6")
	l.record(ns, nil)
	assert.True(t, a.deleted, "deleting the namespace deletes its objects")
}

// Scenarios that run at once share what is written meanwhile: no request says whose it is, so
// each checks it after itself; a write once a scenario ended is not that one's.
func TestLedgerGivesAWriteToEveryScenarioRunningAtOnce(t *testing.T) {
	l := newLedger()
	l.begin("M4")
	l.begin("M5")
	created, _ := parseWrite(http.MethodPost, "/apis/nvidia.com/v1alpha1/namespaces/team-a/dynamographdeployments")
	l.record(created, []byte(`{"metadata":{"name":"g","uid":"1"},"spec":{}}`))
	l.end("M4")
	l.record(created, []byte(`{"metadata":{"name":"h","uid":"2"},"spec":{}}`))

	key := func(scope, name string) ledgerKey {
		return ledgerKey{scope: scope, resource: "dynamographdeployments", namespace: "team-a", name: name}
	}
	assert.Contains(t, l.entries, key("M4", "g"))
	assert.Contains(t, l.entries, key("M5", "g"))
	assert.NotContains(t, l.entries, key("M4", "h"), "written after M4 ended")
	assert.Contains(t, l.entries, key("M5", "h"))
}

// A spec read back through the dynamic client (int64 numbers) equals the one the write
// returned (decoded by encoding/json as float64).
func TestCanonicalJSONComparesNumbersByValue(t *testing.T) {
	assert.Equal(t, canonicalJSON(map[string]any{"replicas": float64(2), "b": "x"}), canonicalJSON(map[string]any{"b": "x", "replicas": int64(2)}))
}

// Removing the finalizer of an object being deleted is a write; the object stays deleted.
func TestLedgerKeepsDeletedObjectsDeleted(t *testing.T) {
	l := newLedger()
	l.begin("T12")
	created, _ := parseWrite(http.MethodPost, "/apis/nvidia.com/v1alpha1/namespaces/t12/dynamographdeployments")
	l.record(created, []byte(`{"metadata":{"name":"stuck","uid":"1"},"spec":{}}`))
	deleted, _ := parseWrite(http.MethodDelete, "/apis/nvidia.com/v1alpha1/namespaces/t12/dynamographdeployments/stuck")
	l.record(deleted, nil)
	patched, _ := parseWrite(http.MethodPatch, "/apis/nvidia.com/v1alpha1/namespaces/t12/dynamographdeployments/stuck")
	l.record(patched, []byte(`{"metadata":{"name":"stuck","uid":"1","deletionTimestamp":"2026-11-24T21:00:00Z"},"spec":{}}`))
	assert.True(t, l.entries[ledgerKey{scope: "T12", resource: "dynamographdeployments", namespace: "t12", name: "stuck"}].deleted)
}
