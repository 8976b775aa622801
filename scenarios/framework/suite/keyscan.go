package suite

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
)

// keyFinding is one line holding private-key material in a collected file.
type keyFinding struct {
	path string
	line int
	form string // what pki.KeyMaterial found
}

func (k keyFinding) String() string { return fmt.Sprintf("%s:%d (%s)", k.path, k.line, k.form) }

// scanForPrivateKeys walks dir (a suite's output: reports, artifacts, exported logs) and
// returns every line holding private-key material (see pki.KeyMaterial). Key material must never
// reach what the suites collect: users attach these directories to bug reports.
func scanForPrivateKeys(dir string) ([]keyFinding, error) {
	var found []keyFinding
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil // nothing collected (a suite whose setup failed before writing)
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path) //nolint:gosec // G304: files under the suite's own output directory
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }() // read only
		lines, err := scanLines(bufio.NewReaderSize(f, scanChunk), func(n int, piece []byte) bool {
			if form, _ := pki.KeyMaterial(piece); form != "" {
				found = append(found, keyFinding{path: path, line: n, form: form})
				return true
			}
			return false
		})
		if err != nil {
			return fmt.Errorf("scanning %s (line %d): %w", path, lines, err)
		}
		return nil
	})
	return found, err
}

// scanChunk is the most of one line scanLines hands over at once, and scanOverlap how much of a
// piece's end it hands over again with the next: a log line can be longer than any buffer (a
// target that logs a 100 MB request body: Kyverno under W10), and key material met at a piece's
// boundary is still whole in one of the two.
const (
	scanChunk   = 4 << 20
	scanOverlap = 64 << 10
)

// scanLines hands each line of r (without its newline) to found with its number, a line longer
// than scanChunk in overlapping pieces until found reports one; it returns the lines read.
func scanLines(r *bufio.Reader, found func(line int, piece []byte) bool) (int, error) {
	n := 0
	var carry []byte // the end of the previous piece of a long line
	done := false    // found reported this line already
	for {
		piece, err := r.ReadSlice('\n')
		if len(piece) == 0 && errors.Is(err, io.EOF) {
			return n, nil
		}
		whole := !errors.Is(err, bufio.ErrBufferFull)
		if len(carry) == 0 && whole {
			n++
			found(n, bytes.TrimSuffix(piece, []byte("\n")))
		} else {
			buf := append(carry, bytes.TrimSuffix(piece, []byte("\n"))...)
			if !done && found(n+1, buf) {
				done = true
			}
			if whole {
				n++
				carry, done = nil, false
			} else {
				carry = append([]byte(nil), buf[max(0, len(buf)-scanOverlap):]...)
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return n, nil
		case err != nil && !errors.Is(err, bufio.ErrBufferFull):
			return n, err
		}
	}
}

// keyScanVerdict is the suite's check on what it collected: "" when clean, else the failure
// message naming at most the first ten places.
func keyScanVerdict(dir string, found []keyFinding, scanErr error) string {
	if scanErr != nil {
		return fmt.Sprintf("scanning %s for private keys: %v", dir, scanErr)
	}
	if len(found) == 0 {
		return ""
	}
	var places []string
	for i, f := range found {
		if i == 10 {
			places = append(places, fmt.Sprintf("… %d more", len(found)-10))
			break
		}
		places = append(places, f.String())
	}
	return fmt.Sprintf("private key material in what the suite collected (lines with a PEM private-key header, plain, base64 or hex-dumped: %d; logs and artifacts must never carry keys): %s",
		len(found), strings.Join(places, ", "))
}
