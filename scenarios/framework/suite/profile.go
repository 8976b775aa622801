package suite

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// ProfileFile is where, in a suite's output directory, it says where its wall time went.
const ProfileFile = "profile.md"

// Sizes of the profile: the waits shown per phase, the sites in the table of waits.
const (
	longestWaitsPerPhase = 3
	waitSitesShown       = 30
)

// phase is a span of a suite's wall time: a step of its setup or teardown, or a scenario.
type phase struct {
	title string
	start time.Time
	took  time.Duration
	// nested says it ran inside another phase (a build within the cluster's creation), whose
	// time holds its own.
	nested bool
	// atOnce says it ran at once with other phases so marked (scenarios of features that run
	// at once): their times overlap.
	atOnce bool
}

func (p phase) holds(w poll.Wait) bool {
	return !w.Start.Before(p.start) && w.Start.Before(p.start.Add(p.took))
}

// profile is where a suite's wall time went: its phases in order and every wait of package
// poll the process made meanwhile.
type profile struct {
	suite  string
	wall   time.Duration
	phases []phase
	waits  []poll.Wait
	// root is the workspace's directory; sites are shown relative to it.
	root string
}

// profile is the suite's profile so far.
func (p *progress) profile(suite, root string) profile {
	p.phasesMu.Lock()
	defer p.phasesMu.Unlock()
	return profile{suite: suite, wall: time.Since(p.start), phases: slices.Clone(p.phases), waits: poll.Waits(p.start), root: root}
}

// writeProfile writes the suite's ProfileFile and returns its path.
func (s *Suite) writeProfile() (string, error) {
	root, _ := workspace.Root() // without it, sites keep their absolute paths
	path := filepath.Join(s.outputDir(), ProfileFile)
	if err := os.MkdirAll(s.outputDir(), 0o750); err != nil {
		return path, err
	}
	return path, os.WriteFile(path, []byte(renderProfile(s.progress.profile(s.spec.Name, root))), 0o600)
}

// renderProfile writes p as Markdown for a person: the phases in order with their share of the
// wall time and their longest waits, then the lines where the suite waited longest in all.
func renderProfile(p profile) string {
	var w strings.Builder
	fmt.Fprintf(&w, "# Where suite %s's time went\n\n", p.suite)
	fmt.Fprintf(&w, "Wall time %s, from the suite's start to this file.\n\n", seconds(p.wall))

	fmt.Fprintf(&w, "## Phases\n\n")
	fmt.Fprintf(&w, "The suite's steps and scenarios in the order they began. ↳ marks a step inside the phase above it: its time is part of that one's. ")
	fmt.Fprintf(&w, "∥ marks scenarios that ran at once: their times overlap, so their shares add up to more than the time they took together, and each one's waits include the others'. ")
	fmt.Fprintf(&w, "A phase's waits are those that began in it (kind, what, how long, where).\n\n")
	fmt.Fprintf(&w, "| phase | took | share | longest waits |\n|---|---:|---:|---|\n")
	for _, ph := range p.phases {
		title := ph.title
		switch {
		case ph.nested:
			title = "↳ " + title
		case ph.atOnce:
			title = "∥ " + title
		}
		var waits []poll.Wait
		for _, wt := range p.waits {
			if ph.holds(wt) {
				waits = append(waits, wt)
			}
		}
		slices.SortStableFunc(waits, func(a, b poll.Wait) int { return cmp.Compare(b.Took, a.Took) })
		var longest []string
		for _, wt := range waits[:min(len(waits), longestWaitsPerPhase)] {
			longest = append(longest, fmt.Sprintf("%s %s: %s (%s)", wt.Kind, seconds(wt.Took), report.MarkdownCell(wt.What), p.site(wt.Site)))
		}
		fmt.Fprintf(&w, "| %s | %s | %s | %s |\n", report.MarkdownCell(title), seconds(ph.took), share(ph.took, p.wall), strings.Join(longest, "<br>"))
	}
	rest := max(p.wall-p.covered(), 0)
	fmt.Fprintf(&w, "| the rest: between the phases above (the reports, the cluster's logs, check S1, …) | %s | %s | |\n\n", seconds(rest), share(rest, p.wall))

	sites := p.bySite()
	fmt.Fprintf(&w, "## Where the suite waited\n\n")
	fmt.Fprintf(&w, "Every wait of package poll, by the line that waited: awaited (poll.Until, expect.Eventually), watched (poll.Throughout), slept (poll.Sleep, a fixed pause). ")
	fmt.Fprintf(&w, "Waits in goroutines of their own overlap others, so the totals may add up to more than the wall time. ")
	fmt.Fprintf(&w, "The %d of %d lines with the most time waited:\n\n", min(len(sites), waitSitesShown), len(sites))
	fmt.Fprintf(&w, "| site | kind | count | total | longest | what (the longest) |\n|---|---|---:|---:|---:|---|\n")
	for _, s := range sites[:min(len(sites), waitSitesShown)] {
		fmt.Fprintf(&w, "| %s | %s | %d | %s | %s | %s |\n", p.site(s.site), s.kind, s.count, seconds(s.total), seconds(s.longest.Took), report.MarkdownCell(s.longest.What))
	}
	return w.String()
}

// covered is the wall time some phase not nested in another took: the time of phases that ran
// at once counted once.
func (p profile) covered() time.Duration {
	var spans []phase
	for _, ph := range p.phases {
		if !ph.nested {
			spans = append(spans, ph)
		}
	}
	slices.SortFunc(spans, func(a, b phase) int { return a.start.Compare(b.start) })
	var total time.Duration
	var until time.Time // the end of the spans counted so far
	for _, ph := range spans {
		start, end := ph.start, ph.start.Add(ph.took)
		if start.Before(until) {
			start = until
		}
		if end.After(start) {
			total += end.Sub(start)
			until = end
		}
	}
	return total
}

// waitSite is the waits of one line.
type waitSite struct {
	site    string
	kind    poll.Kind
	count   int
	total   time.Duration
	longest poll.Wait
}

// bySite groups the waits by the line that waited, most time waited first.
func (p profile) bySite() []waitSite {
	index := map[string]int{}
	var sites []waitSite
	for _, w := range p.waits {
		i, ok := index[w.Site]
		if !ok {
			i = len(sites)
			index[w.Site] = i
			sites = append(sites, waitSite{site: w.Site, kind: w.Kind})
		}
		s := &sites[i]
		s.count++
		s.total += w.Took
		if w.Took > s.longest.Took {
			s.longest = w
		}
	}
	slices.SortStableFunc(sites, func(a, b waitSite) int {
		return cmp.Or(cmp.Compare(b.total, a.total), strings.Compare(a.site, b.site))
	})
	return sites
}

// site is a wait's site relative to the workspace, as a code span.
func (p profile) site(s string) string {
	if p.root != "" {
		s = strings.TrimPrefix(s, p.root+string(filepath.Separator))
	}
	return "`" + s + "`"
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func share(d, wall time.Duration) string {
	if wall <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", 100*d.Seconds()/wall.Seconds())
}
