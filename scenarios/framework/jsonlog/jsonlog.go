// Package jsonlog reads a log written one JSON object per line, as the operator writes it
// (controller-runtime's zap encoder), into the Go type a reader of it declares. Lines that are
// not a JSON object — a panic trace, klog output — are skipped, so a scenario sees what the
// operator logged and nothing else. The package depends on nothing else of the workspace.
package jsonlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// MaxLine is the longest line Read reads; a longer one ends the reading with bufio.ErrTooLong.
const MaxLine = 4 << 20

// Read hands each every line of r that decodes as a JSON object into a T, in the order of the
// log, until r ends. It returns r's error, or bufio.ErrTooLong at a line longer than MaxLine;
// a log that simply ends is no error.
func Read[T any](r io.Reader, each func(T)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var entry T
		if json.Unmarshal(line, &entry) == nil {
			each(entry)
		}
	}
	return sc.Err()
}
