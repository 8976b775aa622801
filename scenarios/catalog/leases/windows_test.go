package leases

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidatorRunsSplitsNeitherAndBoth(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var probes []probe
	for i := range 7 {
		sent := t0.Add(time.Duration(i) * time.Second)
		probes = append(probes, probe{name: string(rune('a' + i)), sent: sent, done: sent.Add(100 * time.Millisecond)})
	}
	// a: B; b, c: neither; d: A; e, f: both; g: neither.
	vA := map[string][]string{"b": {resultSkipped}, "c": {resultSkipped}, "d": {resultDenied}, "e": {resultDenied}, "f": {resultDenied}, "g": {resultSkipped}}
	vB := map[string][]string{"a": {resultDenied}, "e": {resultDenied}, "f": {resultDenied}}
	neither, both := validatorRuns(probes, vA, vB)
	require.Len(t, neither, 2)
	assert.Equal(t, "b", neither[0].first.name)
	assert.Equal(t, "c", neither[0].last.name)
	assert.Equal(t, 2, neither[0].count)
	assert.Equal(t, 1100*time.Millisecond, neither[0].span(), "from the first one's sending to the last one's answer")
	assert.Equal(t, "g", neither[1].first.name)
	require.Len(t, both, 1)
	assert.Equal(t, 2, both[0].count)
	assert.Equal(t, []float64{1.1, 0.1}, spans(neither))
}

func TestLogTimeReadsTheEncodingsOfZap(t *testing.T) {
	for raw, want := range map[string]time.Time{
		`"2026-11-24T21:49:36.123456789Z"`: time.Date(2026, 11, 24, 21, 49, 36, 123456789, time.UTC),
		`"2026-11-24T21:49:36Z"`:           time.Date(2026, 11, 24, 21, 49, 36, 0, time.UTC),
		`1700000000.5`:                     time.Unix(1700000000, 500000000),
	} {
		var e logEntry
		require.NoError(t, json.Unmarshal([]byte(`{"msg":"m","ts":`+raw+`}`), &e))
		assert.True(t, want.Equal(e.Time.Time), "ts %s: expected %s, saw %s", raw, want, e.Time.Time)
	}
	var e logEntry
	require.NoError(t, json.Unmarshal([]byte(`{"msg":"m","ts":{"odd":1}}`), &e), "an unexpected ts must not lose the line")
	assert.True(t, e.Time.IsZero())
	assert.Equal(t, "m", e.Msg)
}
