package poll

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	err := UntilEvery(context.Background(), "the third call", time.Millisecond, time.Second, func(context.Context) (bool, string, error) {
		calls++
		return calls == 3, "not yet", nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("expected success on the third call, saw %v after %d calls", err, calls)
	}
}

func TestUntilTimeoutSaysWhatItWaitedForAndWhatItLastSaw(t *testing.T) {
	calls := 0
	err := UntilEvery(context.Background(), "Godot", time.Millisecond, 50*time.Millisecond, func(context.Context) (bool, string, error) {
		calls++
		if calls > 1 {
			return false, "", nil // nothing to say: the state from before stands
		}
		return false, "an empty road", nil
	})
	want := regexp.MustCompile(`^waited [0-9.]+m?s for Godot; last seen: an empty road$`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Fatalf("expected an error matching %s, saw %v", want, err)
	}
}

func TestUntilWithNothingSeen(t *testing.T) {
	err := UntilEvery(context.Background(), "x", time.Millisecond, 10*time.Millisecond, func(context.Context) (bool, string, error) {
		return false, "", nil
	})
	if want := regexp.MustCompile(`; last seen: nothing yet$`); err == nil || !want.MatchString(err.Error()) {
		t.Fatalf("expected an error matching %s, saw %v", want, err)
	}
}

func TestUntilStopsAtTheConditionsError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	err := Until(context.Background(), "x", time.Minute, func(context.Context) (bool, string, error) {
		calls++
		return false, "", boom
	})
	if !errors.Is(err, boom) || err.Error() != "waiting for x: boom" || calls != 1 {
		t.Fatalf(`expected "waiting for x: boom" after one call, saw %v after %d calls`, err, calls)
	}
}

func TestUntilEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Until(ctx, "x", time.Minute, func(ctx context.Context) (bool, string, error) {
		return false, "cancelled", nil
	})
	if want := regexp.MustCompile(`^waited .* for x; last seen: nothing yet$`); err == nil || !want.MatchString(err.Error()) {
		t.Fatalf("expected an error matching %s, saw %v", want, err)
	}
}
