package load

import (
	"bytes"
	"fmt"
)

// bodyTemplate is a request body marshalled once with placeholder strings,
// split around them so each request only concatenates its own values: the
// targeter runs inside vegeta's measured window (the clock starts before the
// targeter is called), so building a body must cost microseconds, not a JSON
// encoding of a whole AdmissionReview.
type bodyTemplate struct {
	// parts[i] precedes the value of slots[i]; the last part ends the body.
	parts [][]byte
	slots []int
	size  int
}

// newBodyTemplate splits raw around every occurrence of the placeholders;
// slot i of Render is placeholders[i]. Each placeholder must occur at least
// once, and values must not need JSON escaping (names and UIDs do not).
func newBodyTemplate(raw []byte, placeholders ...string) (*bodyTemplate, error) {
	t := &bodyTemplate{size: len(raw)}
	seen := make([]bool, len(placeholders))
	rest := raw
	for {
		at, which := -1, -1
		for i, p := range placeholders {
			if j := bytes.Index(rest, []byte(p)); j >= 0 && (at < 0 || j < at) {
				at, which = j, i
			}
		}
		if at < 0 {
			t.parts = append(t.parts, rest)
			break
		}
		t.parts = append(t.parts, rest[:at])
		t.slots = append(t.slots, which)
		seen[which] = true
		rest = rest[at+len(placeholders[which]):]
	}
	for i, p := range placeholders {
		if !seen[i] {
			return nil, fmt.Errorf("body template: placeholder %q does not occur in %s", p, raw)
		}
	}
	return t, nil
}

// Render returns a new body with values in place of the placeholders, in the
// order they were given to newBodyTemplate.
func (t *bodyTemplate) Render(values ...string) []byte {
	n := t.size
	for _, s := range t.slots {
		n += len(values[s])
	}
	b := make([]byte, 0, n)
	for i, s := range t.slots {
		b = append(b, t.parts[i]...)
		b = append(b, values[s]...)
	}
	return append(b, t.parts[len(t.parts)-1]...)
}
