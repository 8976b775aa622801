package expect

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMessagesBelongToATestAndItsSubtests(t *testing.T) {
	record(t, "parent message")
	t.Run("sub", func(t *testing.T) { record(t, "sub message") })
	t.Run("subsub", func(t *testing.T) {}) // a sibling whose name extends "sub" must not match
	got := Messages(t.Name())
	slices.Sort(got)
	assert.True(t, slices.Equal(got, []string{"parent message", "sub message"}), "expected the test's and its subtest's messages, saw %q", got)
	got = Messages(t.Name() + "/subsub")
	assert.Empty(t, got, "expected no messages for a subtest that recorded none, saw %q", got)
	got = Messages(t.Name()[:len(t.Name())-1])
	assert.Empty(t, got, "expected a name prefix that is not a parent to match nothing, saw %q", got)
}
