package certmodes

import "testing"

func TestInSequence(t *testing.T) {
	steps := []logStep{{always: []string{"no certificate"}, maybe: []string{"not found"}}, {always: []string{"elected"}}, {always: []string{"loaded"}}}
	for _, c := range []struct {
		seen []string
		want bool
	}{
		{[]string{"not found", "no certificate", "elected", "loaded"}, true},
		{[]string{"no certificate", "not found", "elected", "loaded"}, true}, // the first read failed; the next found no Secret
		{[]string{"no certificate", "elected", "loaded"}, true},              // the first read failed; the leader wrote before the next (kind)
		{[]string{"not found", "elected", "no certificate", "loaded"}, false},
		{[]string{"no certificate", "elected", "not found", "loaded"}, false},
		{[]string{"not found", "no certificate", "loaded", "elected"}, false},
		{[]string{"not found", "not found", "no certificate", "elected", "loaded"}, false},
		{[]string{"no certificate", "no certificate", "elected", "loaded"}, false},
		{[]string{"not found", "no certificate", "elected"}, false},
		{[]string{"not found", "elected", "loaded"}, false},
		{nil, false},
	} {
		if got := inSequence(c.seen, steps); got != c.want {
			t.Errorf("inSequence(%q) = %v, want %v", c.seen, got, c.want)
		}
	}
	if got, want := describeSequence(steps), `"no certificate" once (and "not found" at most once), then "elected" once, then "loaded" once`; got != want {
		t.Errorf("describeSequence = %s, want %s", got, want)
	}
	multi := []logStep{{always: []string{"a", "b"}}}
	if got, want := describeSequence(multi), `"a", "b" once each in either order`; got != want {
		t.Errorf("describeSequence = %s, want %s", got, want)
	}
}
