// Package reporttest holds the assertions the tests of rendered reports share (the e2e summary
// of scenarios/framework/report, the bench report of bench/report): text in order, a section of it, a
// line of it.
package reporttest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// InOrder asserts that s contains every part, each after the one before.
func InOrder(t *testing.T, s string, parts ...string) {
	t.Helper()
	last := -1
	for _, p := range parts {
		i := strings.Index(s, p)
		require.GreaterOrEqualf(t, i, 0, "%q not found", p)
		assert.Greaterf(t, i, last, "%q is out of order", p)
		last = i
	}
}

// Section returns the part of s from the first from up to the next to after it; a missing
// from or to fails the test.
func Section(t *testing.T, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	require.GreaterOrEqualf(t, i, 0, "section %q not found", from)
	j := strings.Index(s[i:], to)
	require.GreaterOrEqualf(t, j, 0, "section end %q not found", to)
	return s[i : i+j]
}

// LineStartingWith returns the first of lines that starts with prefix; none fails the test.
func LineStartingWith(t *testing.T, lines []string, prefix string) string {
	t.Helper()
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no line starts with %q", prefix)
	return ""
}
