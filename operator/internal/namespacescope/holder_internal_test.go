package namespacescope

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGiveUpArithmeticWithDefaults(t *testing.T) {
	d := DefaultTimings() // 25s lease, 10s renew interval: margin 2.5s
	last := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s float64) time.Time { return last.Add(time.Duration(s * float64(time.Second))) }

	for _, tc := range []struct {
		failedAt float64
		giveUp   bool
	}{
		{10, false},   // 10s since + 10s interval = 20s: the retry at 20s can end by 22.5s
		{12.4, false}, // the retry at 22.4s still has 100ms before the margin
		{12.5, true},  // the retry would have no time left before expiry - margin
		{15, true},    // the retry would come as the Lease expires
	} {
		got := d.tooLateToRetry(last, at(tc.failedAt))
		assert.Equal(t, tc.giveUp, got, "failure %.3fs after the last renewal: give up = %v, want %v", tc.failedAt, got, tc.giveUp)
	}
	got, want := d.attemptDeadline(last, at(10)), at(20)
	assert.True(t, got.Equal(want), "first attempt's deadline = %s, want one renew interval later (%s)", got, want)
	got, want = d.attemptDeadline(last, at(20)), at(22.5)
	assert.True(t, got.Equal(want), "second attempt's deadline = %s, want 2.5s before expiry (%s)", got, want)
}

// TestGiveUpBeforeExpiry simulates a holder whose renewals all fail, instantly or only when
// their deadline passes, for many timings: it must make at least one attempt and always give up
// while its Lease is still valid.
func TestGiveUpBeforeExpiry(t *testing.T) {
	last := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, ld := range []time.Duration{time.Second, 2 * time.Second, 25 * time.Second, 60 * time.Second} {
		for _, fraction := range []float64{0.05, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 0.99} {
			timings := Timings{LeaseDuration: ld, RenewInterval: time.Duration(fraction * float64(ld))}
			require.NoError(t, timings.Validate(), "%+v", timings)
			for _, hang := range []bool{false, true} {
				t.Run(fmt.Sprintf("lease %s renew %s hang %v", ld, timings.RenewInterval, hang), func(t *testing.T) {
					start := last.Add(timings.RenewInterval)
					for attempts := 1; ; attempts++ {
						deadline := timings.attemptDeadline(last, start)
						require.True(t, deadline.After(start), "attempt %d at +%s has no time left (deadline +%s)", attempts, start.Sub(last), deadline.Sub(last))
						failedAt := start
						if hang {
							failedAt = deadline
						}
						if timings.tooLateToRetry(last, failedAt) {
							require.True(t, failedAt.Before(last.Add(ld)), "gave up at +%s, not before the Lease expired at +%s", failedAt.Sub(last), ld)
							return
						}
						start = start.Add(timings.RenewInterval)
						if failedAt.After(start) {
							start = failedAt
						}
						require.LessOrEqual(t, attempts, 1000, "never gave up")
					}
				})
			}
		}
	}
}
