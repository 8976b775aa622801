package suite

import (
	"bufio"
	"errors"
	"fmt"
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
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024) // log lines carrying objects are long
		for n := 1; sc.Scan(); n++ {
			if form, _ := pki.KeyMaterial(sc.Bytes()); form != "" {
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
