// Package scenarios_test keeps the scenario catalog (CATALOG.md) and the scenario code in step:
// every feature's scenario label is a row of the catalog, and every row links to the file
// that implements it.
package scenarios_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/admission"
	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/certmodes"
	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/contract"
	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/conversion"
	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/hostile"
	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/leases"
	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/troubleshooting"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// catalogFile is the catalog, relative to this package's directory (the scenarios module).
const catalogFile = "CATALOG.md"

// catalogRow is one scenario of the catalog: its ID and the file it links to ("" when the row
// is marked planned).
type catalogRow struct {
	id, link string
	line     int
}

// rowPattern matches a catalog table row's first cell: a linked ID, "[C1](certmodes/automatic.go)",
// or a planned one, "P3 *(planned)*".
var rowPattern = regexp.MustCompile(`^\| (?:\[([ACMTHPW][0-9]+)\]\(([^)#]+)\)|([ACMTHPW][0-9]+) \*\(planned\)\*) \|`)

func readCatalog(t *testing.T) []catalogRow {
	t.Helper()
	f, err := os.Open(catalogFile)
	require.NoError(t, err)
	defer func() { _ = f.Close() }() // read only
	var rows []catalogRow
	scan := bufio.NewScanner(f)
	for n := 1; scan.Scan(); n++ {
		m := rowPattern.FindStringSubmatch(scan.Text())
		switch {
		case m == nil:
		case m[1] != "":
			rows = append(rows, catalogRow{id: m[1], link: m[2], line: n})
		default:
			rows = append(rows, catalogRow{id: m[3], line: n})
		}
	}
	require.NoError(t, scan.Err())
	require.NotEmpty(t, rows, "%s has no scenario rows (a row starts `| [ID](file) |` or `| ID *(planned)* |`)", catalogFile)
	return rows
}

// allFeatures are the features of every suite, as the e2e suites compose them.
func allFeatures() []types.Feature {
	plan := leases.QuickPlan
	topology := release.NewTopology(chart.LeaseTimings{Duration: 6 * time.Second, RenewInterval: 2 * time.Second, GracePeriod: 2 * time.Second})
	return slices.Concat(admission.Features(), certmodes.Features(), conversion.Features(),
		leases.Features(topology, &plan), troubleshooting.Features(), hostile.Features(), contract.Features())
}

func TestCatalogMatchesScenarioCode(t *testing.T) {
	rows := readCatalog(t)
	byID := map[string]catalogRow{}
	for _, r := range rows {
		if prev, dup := byID[r.id]; dup {
			t.Errorf("%s:%d: %s is listed twice (first at line %d)", catalogFile, r.line, r.id, prev.line)
		}
		byID[r.id] = r
	}

	implemented := map[string][]string{} // scenario ID → names of the features labelled with it
	for _, f := range allFeatures() {
		ids := f.Labels()[suite.LabelScenario]
		if len(ids) == 0 {
			t.Errorf("feature %q has no %s label", f.Name(), suite.LabelScenario)
		}
		for _, id := range ids {
			implemented[id] = append(implemented[id], f.Name())
		}
	}

	for id, names := range implemented {
		r, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("feature %q is labelled %s=%s, which %s does not list: add a row for it", names[0], suite.LabelScenario, id, catalogFile)
		case r.link == "":
			t.Errorf("%s:%d: %s is marked planned, but feature %q implements it: link the row to its file", catalogFile, r.line, id, names[0])
		}
	}
	for _, r := range rows {
		if r.link == "" {
			continue
		}
		src, err := os.ReadFile(filepath.FromSlash(r.link))
		if err != nil {
			t.Errorf("%s:%d: %s links to %s, which cannot be read: %v", catalogFile, r.line, r.id, r.link, err)
			continue
		}
		// The linked file names the ID: as the label (or the argument that becomes it) or, for
		// the benchmark's rows, in a doc comment.
		if !regexp.MustCompile(`\b` + r.id + `\b`).Match(src) {
			t.Errorf("%s:%d: %s links to %s, which does not mention %s: link the file that defines the scenario", catalogFile, r.line, r.id, r.link, r.id)
		}
		if r.id[0] != 'P' && len(implemented[r.id]) == 0 {
			t.Errorf("%s:%d: %s links to %s, but no feature is labelled %s=%s: mark the row *(planned)* or label its feature", catalogFile, r.line, r.id, r.link, suite.LabelScenario, r.id)
		}
	}
}

// The catalog's IDs run without gaps within each group (A1…A11, C1…C10, …): a removed scenario
// keeps its row (marked planned or with a note), so IDs in old reports keep their meaning.
func TestCatalogIDsAreContiguous(t *testing.T) {
	last := map[byte]int{}
	for _, r := range readCatalog(t) {
		n, err := strconv.Atoi(r.id[1:])
		require.NoError(t, err)
		assert.Equal(t, last[r.id[0]]+1, n, "%s:%d: after %c%d comes %c%d", catalogFile, r.line, r.id[0], last[r.id[0]], r.id[0], last[r.id[0]]+1)
		last[r.id[0]] = n
	}
}
