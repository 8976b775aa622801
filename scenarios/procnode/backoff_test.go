package procnode

import (
	"testing"
	"time"
)

func TestCrashBackoffDoublesUpToMaxAndResetsAfterALongRun(t *testing.T) {
	b := newCrashBackoff(10*time.Second, 40*time.Second)
	var got []time.Duration
	for range 5 {
		got = append(got, b.next(time.Second))
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("back-off sequence = %v, want %v", got, want)
		}
	}
	if d := b.next(2 * 40 * time.Second); d != 0 {
		t.Fatalf("after a run longer than twice the max, back-off = %v, want an immediate restart", d)
	}
	if d := b.next(time.Second); d != 10*time.Second {
		t.Fatalf("after a reset the next crash waits %v, want 10s", d)
	}
}
