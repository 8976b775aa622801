package expect

import (
	"slices"
	"testing"
)

func TestMessagesBelongToATestAndItsSubtests(t *testing.T) {
	record(t, "parent message")
	t.Run("sub", func(t *testing.T) { record(t, "sub message") })
	t.Run("subsub", func(t *testing.T) {}) // a sibling whose name extends "sub" must not match
	got := Messages(t.Name())
	slices.Sort(got)
	if !slices.Equal(got, []string{"parent message", "sub message"}) {
		t.Errorf("expected the test's and its subtest's messages, saw %q", got)
	}
	if got := Messages(t.Name() + "/subsub"); len(got) != 0 {
		t.Errorf("expected no messages for a subtest that recorded none, saw %q", got)
	}
	if got := Messages(t.Name()[:len(t.Name())-1]); len(got) != 0 {
		t.Errorf("expected a name prefix that is not a parent to match nothing, saw %q", got)
	}
}
