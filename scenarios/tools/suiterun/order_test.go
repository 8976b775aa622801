package suiterun

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheLongestSuitesStartFirstAndThoseNeverTimedBeforeThem(t *testing.T) {
	last := Durations{"autocert": 8 * time.Minute, "hostile": time.Minute, "multioperator": 16 * time.Minute, "troubleshooting": 3 * time.Minute}
	got := last.LongestFirst([]string{"autocert", "certmanager", "hostile", "multioperator", "troubleshooting", "conformance"})
	assert.Equal(t, []string{"certmanager", "conformance", "multioperator", "autocert", "troubleshooting", "hostile"}, got)
}

func TestWithoutARecordTheSuitesKeepTheirOrder(t *testing.T) {
	d, err := ReadDurations(filepath.Join(t.TempDir(), "none.json"))
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "a", "c"}, d.LongestFirst([]string{"b", "a", "c"}))
}

func TestTheTimesOfSuitesThatEndedAreKeptForTheNextRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e2e", "times.json")
	t0 := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	d := Durations{"hostile": time.Minute} // from an earlier run, not in this one
	require.NoError(t, d.Record(path, []SuiteState{
		{Name: "autocert", Status: Ended, Started: t0, Ended: t0.Add(7*time.Minute + 48*time.Second)},
		{Name: "multioperator", Status: NotStarted},
	}))
	again, err := ReadDurations(path)
	require.NoError(t, err)
	assert.Equal(t, Durations{"autocert": 7*time.Minute + 48*time.Second, "hostile": time.Minute}, again)
}

func TestAnUnreadableRecordIsNamedWithWhatToDo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "times.json")
	require.NoError(t, os.WriteFile(path, []byte("{"), 0o600))
	_, err := ReadDurations(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "delete it: the next run writes it again")
}
