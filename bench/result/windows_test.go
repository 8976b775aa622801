package result

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestWindowRecorderCutsAnAttackIntoEqualSlices(t *testing.T) {
	start := time.Unix(1000, 0)
	rec := NewWindowRecorder(start, 4*time.Second, 4)
	// 100 requests per second; the third second stalls two requests.
	for sec := 0; sec < 4; sec++ {
		for i := 0; i < 100; i++ {
			latency := time.Duration(i+1) * 10 * time.Microsecond // 0.01 … 1 ms
			if sec == 2 && i >= 98 {
				latency = 800 * time.Millisecond
			}
			rec.Add(start.Add(time.Duration(sec)*time.Second+time.Duration(i)*10*time.Millisecond), latency)
		}
	}
	// Sent just after the span (vegeta's last tick): counted in the last window.
	rec.Add(start.Add(4*time.Second+time.Millisecond), time.Millisecond)

	w := rec.Windows()
	if assert.Len(t, w, 4) {
		assert.Equal(t, Window{StartSeconds: 0, Requests: 100, P50Ms: 0.5, P99Ms: 0.99}, w[0])
		assert.InDelta(t, 800.0, w[2].P99Ms, 1e-9, "the 99th of 100 requests is the first stalled one")
		assert.Equal(t, 101, w[3].Requests)
		assert.InDelta(t, 3.0, w[3].StartSeconds, 1e-9)
	}
	s := Step{P99Ms: 800, Windows: w}
	assert.InDelta(t, 0.995, median(s.WindowP99s()), 1e-12, "the stall stays in its window: the median of 0.99, 0.99, 800 and 1 ms")
}

func TestWindowRecorderSkipsEmptyWindows(t *testing.T) {
	start := time.Unix(1000, 0)
	rec := NewWindowRecorder(start, time.Second, 10)
	rec.Add(start.Add(950*time.Millisecond), 2*time.Millisecond)
	assert.Equal(t, []Window{{StartSeconds: 0.9, Requests: 1, P50Ms: 2, P99Ms: 2}}, rec.Windows())
}

func TestStepWithoutWindowsIsOneSample(t *testing.T) {
	s := Step{P50Ms: 0.3, P99Ms: 1.5}
	assert.Equal(t, []float64{1.5}, s.WindowP99s())
	assert.Equal(t, []float64{0.3}, s.WindowP50s())
}
