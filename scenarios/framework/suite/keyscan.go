package suite

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// privateKeyBlock matches the header of a PEM private-key block of any kind ("PRIVATE KEY",
// "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY"), also inside JSON strings,
// however deeply escaped: JSON escapes neither '-' nor ' ', and turns the newline after the
// header into \n, so the header stays on one line.
var privateKeyBlock = regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)

// privateKeyHeaderEnd is how every private-key header ends, whatever its kind (and its
// footer, -----END … PRIVATE KEY-----, too), and what no certificate holds: the part of the
// header S1 looks for in encoded key material.
const privateKeyHeaderEnd = "PRIVATE KEY-----"

// base64KeyHeaders are privateKeyHeaderEnd in base64, at each of the three byte alignments it
// can have in the encoded data (what precedes it, the kind included, has any length): a
// Secret's data is base64 in its JSON form (kubectl, the API, a request or response body
// client-go logs) and wherever Go marshals it to JSON (a []byte becomes base64: so does a
// Secret's data map handed to a logger, while controller-runtime's logger writes a whole
// object as its namespace and name only). Base64 has no character JSON escapes.
var base64KeyHeaders = base64Forms(privateKeyHeaderEnd)

// base64Forms returns, for each byte alignment of s in data, the base64 characters that s
// alone determines, the same wherever s is: character j of an encoding carries bits
// [6j, 6j+6) of its input, so with lead bytes before s the characters from ceil(8·lead/6) up
// to, not including, floor(8·(lead+len(s))/6).
func base64Forms(s string) []string {
	forms := make([]string, 0, 3)
	for lead := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, lead), s...))
		forms = append(forms, enc[(8*lead+5)/6:8*(lead+len(s))/6])
	}
	return forms
}

// hexDumpRow is a row of encoding/hex.Dump: an offset, then up to 16 bytes in hex. client-go
// logs a request or response body that is not text that way (from V(8), whole from V(10)), and
// controller-runtime's client sends and reads built-in kinds, Secrets among them, as protobuf,
// whose bytes of a Secret's data are the PEM text itself, cut into rows of 16.
var hexDumpRow = regexp.MustCompile(`[0-9a-f]{8}  ((?:[0-9a-f]{2} {1,2}){1,16})`)

// firstHexDumpRow starts every hex dump; lines without it skip the hex-dump decoding.
const firstHexDumpRow = "00000000  "

// keyMaterial names the form of private-key material line holds ("" for none): a PEM
// private-key header, its base64 form, or either inside a hex dump.
func keyMaterial(line []byte) string {
	if form := pemOrBase64Key(line); form != "" {
		return form
	}
	if !bytes.Contains(line, []byte(firstHexDumpRow)) {
		return ""
	}
	var digits []byte
	for _, row := range hexDumpRow.FindAllSubmatch(line, -1) {
		digits = append(digits, bytes.ReplaceAll(row[1], []byte(" "), nil)...)
	}
	dumped := make([]byte, hex.DecodedLen(len(digits)))
	_, _ = hex.Decode(dumped, digits) // cannot fail: the rows hold pairs of hex digits only
	if form := pemOrBase64Key(dumped); form != "" {
		return form + " in a hex dump"
	}
	return ""
}

func pemOrBase64Key(b []byte) string {
	if privateKeyBlock.Match(b) {
		return "PEM private-key header"
	}
	for _, f := range base64KeyHeaders {
		if bytes.Contains(b, []byte(f)) {
			return "base64 PEM private-key header"
		}
	}
	return ""
}

// keyFinding is one line holding private-key material in a collected file.
type keyFinding struct {
	path string
	line int
	form string // what keyMaterial found
}

func (k keyFinding) String() string { return fmt.Sprintf("%s:%d (%s)", k.path, k.line, k.form) }

// scanForPrivateKeys walks dir (a suite's output: reports, artifacts, exported logs) and
// returns every line holding private-key material (see keyMaterial). Key material must never
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
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024) // log lines carrying objects are long
		for n := 1; sc.Scan(); n++ {
			if form := keyMaterial(sc.Bytes()); form != "" {
				found = append(found, keyFinding{path: path, line: n, form: form})
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("scanning %s: %w", path, err)
		}
		return nil
	})
	return found, err
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
