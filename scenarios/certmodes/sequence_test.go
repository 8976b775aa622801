package certmodes

import "testing"

func TestInSequence(t *testing.T) {
	groups := [][]string{{"not found", "no certificate"}, {"elected"}, {"loaded"}}
	for _, c := range []struct {
		seen []string
		want bool
	}{
		{[]string{"not found", "no certificate", "elected", "loaded"}, true},
		{[]string{"no certificate", "not found", "elected", "loaded"}, true}, // the race C1 met on kind
		{[]string{"not found", "elected", "no certificate", "loaded"}, false},
		{[]string{"not found", "no certificate", "loaded", "elected"}, false},
		{[]string{"not found", "not found", "no certificate", "elected", "loaded"}, false},
		{[]string{"not found", "no certificate", "elected"}, false},
		{nil, false},
	} {
		if got := inSequence(c.seen, groups); got != c.want {
			t.Errorf("inSequence(%q) = %v, want %v", c.seen, got, c.want)
		}
	}
	if got, want := describeSequence(groups), `"not found", "no certificate" in either order, then "elected", then "loaded"`; got != want {
		t.Errorf("describeSequence = %s, want %s", got, want)
	}
}
