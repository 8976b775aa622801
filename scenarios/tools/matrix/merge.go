package matrix

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Merge reads the result.json of every part — matrix runs of some cells each, as the nightly
// workflow's jobs write them — into one result whose reports and logs are linked relative to
// out. Its time is the parts' total; its Jobs the largest part's.
func Merge(out string, parts []string) (Result, error) {
	if len(parts) == 0 {
		return Result{}, fmt.Errorf("merging matrix results: no part given")
	}
	var merged Result
	for _, part := range parts {
		raw, err := os.ReadFile(filepath.Join(part, ResultFile)) //nolint:gosec // G304: a part the caller names
		if err != nil {
			return Result{}, fmt.Errorf("merging matrix results: %w", err)
		}
		var r Result
		if err := json.Unmarshal(raw, &r); err != nil {
			return Result{}, fmt.Errorf("merging matrix results: %s: %w", filepath.Join(part, ResultFile), err)
		}
		rel, err := filepath.Rel(out, part)
		if err != nil {
			return Result{}, err
		}
		for _, c := range r.Cells {
			if c.Reports != "" {
				c.Reports = filepath.Join(rel, c.Reports)
			}
			if c.Log != "" {
				c.Log = filepath.Join(rel, c.Log)
			}
			merged.Cells = append(merged.Cells, c)
		}
		if merged.StartedAt.IsZero() || r.StartedAt.Before(merged.StartedAt) {
			merged.StartedAt = r.StartedAt
		}
		merged.Seconds += r.Seconds
		merged.Jobs = max(merged.Jobs, r.Jobs)
	}
	return merged, nil
}
