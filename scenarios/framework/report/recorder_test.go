package report

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock advances only when told, so recorded durations are exact.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestRecorderRecordsOutcomesAndDurations(t *testing.T) {
	clock := &fakeClock{t: time.Date(2025, 11, 21, 9, 0, 0, 0, time.UTC)}
	r := newRecorder("autocert", "local", "", clock.now)
	r.SetKubernetesVersion("v1.37.0")

	require.NoError(t, r.Start("A10", "Defaulting"))
	require.NoError(t, r.Start("A2", "Denial"))
	require.NoError(t, r.Note("A2", "attempts", 2))
	clock.advance(1500 * time.Millisecond)
	require.NoError(t, r.Finish("A10", Passed, nil))
	clock.advance(500 * time.Millisecond)
	require.NoError(t, r.Finish("A2", Failed, map[string]any{MessageKey: "was admitted", "attempts": 3}))

	s := r.Summary()
	assert.Equal(t, "autocert", s.Suite)
	assert.Equal(t, "v1.37.0", s.KubernetesVersion)
	assert.Equal(t, clock.t.Add(-2*time.Second), s.StartedAt)
	assert.InDelta(t, 2.0, s.Seconds, 1e-9)
	require.Equal(t, []string{"A2", "A10"}, scenarioIDs(s))
	assert.Equal(t, Scenario{ID: "A2", Title: "Denial", Result: Failed, Seconds: 2,
		Details: map[string]any{MessageKey: "was admitted", "attempts": 3}}, s.Scenarios[0],
		"Finish's details replace noted ones with the same key")
	assert.Equal(t, Scenario{ID: "A10", Title: "Defaulting", Result: Passed, Seconds: 1.5, Details: map[string]any{}}, s.Scenarios[1])
}

func TestRecorderReportsUnfinishedScenarioAsFailed(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	r := newRecorder("certmanager", "local", "v1.37.0", clock.now)
	require.NoError(t, r.Start("C8", "Renewal under load"))
	require.NoError(t, r.Note("C8", "admissions", 120))
	clock.advance(3 * time.Second)

	s := r.Summary()
	require.Len(t, s.Scenarios, 1)
	sc := s.Scenarios[0]
	assert.Equal(t, Failed, sc.Result)
	assert.InDelta(t, 3.0, sc.Seconds, 1e-9)
	assert.Contains(t, sc.Message(), "never finished")
	assert.Equal(t, 120, sc.Details["admissions"], "measurements taken before the cut are kept")
}

func TestRecorderRejectsMisuse(t *testing.T) {
	r := NewRecorder("x", "local", "v1.37.0")
	require.NoError(t, r.Start("A1", "t"))

	err := r.Start("A1", "t")
	require.Error(t, err)
	assert.Equal(t, "starting scenario A1: already running", err.Error())

	err = r.Finish("A3", Passed, nil)
	require.Error(t, err)
	assert.Equal(t, "finishing scenario A3: it was never started", err.Error())

	err = r.Finish("A1", "green", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `result "green" is not passed, failed or skipped`)

	require.NoError(t, r.Finish("A1", Passed, nil))
	require.EqualError(t, r.Finish("A1", Passed, nil), "finishing scenario A1: already finished")
	require.EqualError(t, r.Start("A1", "t"), "starting scenario A1: already finished")
	assert.EqualError(t, r.Note("A1", "k", 1), "noting k on scenario A1: scenario is not running")
}

func TestRecorderIsSafeForConcurrentUse(t *testing.T) {
	r := NewRecorder("autocert", "local", "v1.37.0")
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("A%d", i+1)
			assert.NoError(t, r.Start(id, "scenario "+id))
			assert.NoError(t, r.Note(id, "i", i))
			_ = r.Summary() // readers run while writers do
			result := Passed
			if i%8 == 0 {
				result = Failed
			}
			assert.NoError(t, r.Finish(id, result, map[string]any{"done": true}))
		})
	}
	wg.Wait()

	s := r.Summary()
	require.Len(t, s.Scenarios, n)
	assert.Equal(t, Counts{Passed: n - n/8, Failed: n / 8}, s.Counts())
	assert.Equal(t, "A1", s.Scenarios[0].ID)
	assert.Equal(t, "A64", s.Scenarios[n-1].ID)

	dir := t.TempDir()
	require.NoError(t, r.WriteFiles(dir))
	back, err := ReadSummary(filepath.Join(dir, SummaryFile))
	require.NoError(t, err)
	assert.Len(t, back.Scenarios, n)
}
