package pki

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"regexp"
)

// privateKeyBlock matches the header of a PEM private-key block of any kind ("PRIVATE KEY",
// "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY"), also inside JSON strings,
// however deeply escaped: JSON escapes neither '-' nor ' ', and turns the newline after the
// header into \n, so the header stays on one line.
var privateKeyBlock = regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)

// privateKeyHeaderEnd is how every private-key header ends, whatever its kind (and its
// footer, -----END … PRIVATE KEY-----, too), and what no certificate holds: the part of the
// header KeyMaterial looks for in encoded key material.
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

// PEMKeyHeader is KeyMaterial's name for a PEM private-key header as text.
const PEMKeyHeader = "PEM private-key header"

// KeyMaterial names the form of private-key material line holds ("" for none) — a PEM
// private-key header, its base64 form, or either inside a hex dump — and where in line it
// starts (the header, or the hex dump): what comes before holds no key.
func KeyMaterial(line []byte) (string, int) {
	if form, at := pemOrBase64Key(line); form != "" {
		return form, at
	}
	dump := bytes.Index(line, []byte(firstHexDumpRow))
	if dump < 0 {
		return "", -1
	}
	var digits []byte
	for _, row := range hexDumpRow.FindAllSubmatch(line, -1) {
		digits = append(digits, bytes.ReplaceAll(row[1], []byte(" "), nil)...)
	}
	dumped := make([]byte, hex.DecodedLen(len(digits)))
	_, _ = hex.Decode(dumped, digits) // cannot fail: the rows hold pairs of hex digits only
	if form, _ := pemOrBase64Key(dumped); form != "" {
		return form + " in a hex dump", dump
	}
	return "", -1
}

func pemOrBase64Key(b []byte) (string, int) {
	if loc := privateKeyBlock.FindIndex(b); loc != nil {
		return PEMKeyHeader, loc[0]
	}
	first := -1 // the header, before its footer (both end in privateKeyHeaderEnd)
	for _, f := range base64KeyHeaders {
		if at := bytes.Index(b, []byte(f)); at >= 0 && (first < 0 || at < first) {
			first = at
		}
	}
	if first >= 0 {
		return "base64 PEM private-key header", first
	}
	return "", -1
}
