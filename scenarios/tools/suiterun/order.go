package suiterun

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Durations is how long each suite took when it last ran to its end on this machine, by suite:
// what orders the next run's suites.
type Durations map[string]time.Duration

// ReadDurations reads the durations recorded at path. No file yet is no record (an empty
// Durations); a file that cannot be read is an error naming it.
func ReadDurations(path string) (Durations, error) {
	b, err := os.ReadFile(path) //nolint:gosec // G304: the runner's own record in the cache
	if errors.Is(err, fs.ErrNotExist) {
		return Durations{}, nil
	}
	if err != nil {
		return nil, err
	}
	var seconds map[string]float64
	if err := json.Unmarshal(b, &seconds); err != nil {
		return nil, fmt.Errorf("%s: %w (delete it: the next run writes it again)", path, err)
	}
	d := Durations{}
	for name, s := range seconds {
		d[name] = time.Duration(s * float64(time.Second))
	}
	return d, nil
}

// Record keeps the time of every suite that ran to its end, passed or failed, and writes the
// record to path, keeping what it held of other suites. Not for an interrupted run: its suites
// ended early.
func (d Durations) Record(path string, states []SuiteState) error {
	for _, s := range states {
		if s.Status == Ended {
			d[s.Name] = s.Elapsed(s.Ended)
		}
	}
	seconds := map[string]float64{}
	for name, took := range d {
		seconds[name] = took.Round(time.Second).Seconds()
	}
	b, err := json.MarshalIndent(seconds, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

// LongestFirst is suites in the order that ends a run of them soonest, as far as the record
// knows: those it holds no time for first (one may be the longest), in the order given, then
// the others, longest first. With fewer slots than suites, a long suite that starts last
// would run on alone after the others ended.
func (d Durations) LongestFirst(suites []string) []string {
	out := slices.Clone(suites)
	slices.SortStableFunc(out, func(a, b string) int {
		da, knownA := d[a]
		db, knownB := d[b]
		switch {
		case !knownA || !knownB:
			return cmp.Compare(boolInt(knownA), boolInt(knownB))
		default:
			return cmp.Compare(db, da)
		}
	})
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
